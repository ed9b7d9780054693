"""IFCA (Ghosh et al.): every round each client takes the model with the lowest training loss.

Ties go to the lowest model index (torch.argmin's rule). With identical initial
models every loss ties, so every client picks model 0 and the other models are
never trained: the collapse CFL Lab's IFCA-initialisation page demonstrates.
"""
from __future__ import annotations

import torch

from .base import Algorithm, InitOptions, RoundOutcome


class IFCA(Algorithm):
    name = "ifca"
    label = "IFCA"
    summary = "Each client picks the model with the lowest loss on its data; models average their clients."
    needs_models = True
    uses_init_mode = True
    has_loss_vectors = True
    Options = InitOptions

    def setup(self, clients):
        self.models, extras = self.initial_models(self.num_models, clients)
        return extras

    def run_round(self, round_index, participants):
        # Each client evaluates the K models and keeps the best itself: no losses go up.
        losses = self.engine.loss_matrix(self.models, participants, uploads=False)
        self.assign[participants] = torch.argmin(losses, dim=1)  # first minimum on ties
        self.models, train_loss = self.engine.train_and_aggregate(
            self.models, participants, self.assign[participants], round_index,
            weighting=self.opts.weighting)
        return RoundOutcome("clustering", losses, train_loss)
