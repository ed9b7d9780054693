"""Local-only: every client trains its own model on its own data, no federation."""
from __future__ import annotations

import torch

from .base import Algorithm, RoundOutcome


class LocalOnly(Algorithm):
    name = "local"
    label = "Local only"
    summary = "Each client trains alone and is tested on its own model (no communication)."
    one_model_per_client = True

    def setup(self, clients):
        self.models = self.base_model().expand(self.ctx.fed.num_clients, -1).clone()
        self.assign = torch.arange(self.ctx.fed.num_clients)
        return {}

    def place_newcomers(self, clients, round_index):
        pass  # every client has had its own model since the set-up

    def run_round(self, round_index, participants):
        trained, train_loss = self.engine.train_without_exchange(self.models[participants], participants, round_index)
        self.models[participants] = trained.to(self.models.device)
        return RoundOutcome("training", None, train_loss)
