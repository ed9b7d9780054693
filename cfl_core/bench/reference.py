"""The sequential engine: the loop every peer tool runs, behind the batched Engine's interface.

Same interface and the same aggregation code as `Engine`, but the loss matrix is
the per-client, per-model loop and local training is one client after another
(a torch.nn module and a torch.optim optimiser each), over the very minibatch
schedule the batched engine uses. An algorithm given this engine makes the same
decisions with the peers' cost, which is what the benchmark's full-round
comparison times.
"""
from __future__ import annotations

import torch

from ..engine.core import Engine
from ..engine.reference import learn_mixing_sequential, reference_loss_matrix, train_sequential


class SequentialEngine(Engine):
    def _loss_values(self, models: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        return reference_loss_matrix(self.spec, models, self.fed, clients.cpu())

    def train_without_exchange(self, start, clients, round_index, train=None, stream=None, schedule=None,
                               objective=None, memory=None):
        train = train or self.train_cfg
        stream = round_index if stream is None else stream
        clients = clients.cpu()
        sched = schedule if schedule is not None else self.schedule(clients, stream, train)
        part = memory.rows(clients) if memory is not None else None
        extra = {name: v for name, v in (("objective", objective), ("memory", part)) if v is not None}
        params, loss = train_sequential(self.spec, start, self.fed, clients, sched, train, **extra)
        if part is not None:
            memory.store(clients, part)
        return params, loss.cpu()

    def _learn_mixing(self, local, received, weights, mixed, clients, schedule, eta, passes, threshold, window):
        return learn_mixing_sequential(self.spec, local, received, weights, mixed, self.fed, clients, schedule, eta,
                                       passes, threshold, window)
