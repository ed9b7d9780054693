"""Oracle: FedAvg inside the true clusters — the accuracy a perfect clustering reaches."""
from __future__ import annotations

from .base import Algorithm, RoundOutcome, WeightingOptions


class Oracle(Algorithm):
    name = "oracle"
    label = "Oracle (true clusters)"
    summary = "Knows every client's true cluster and runs FedAvg inside each: the ceiling."
    Options = WeightingOptions

    def setup(self, clients):
        truth = self.ctx.true_clusters()
        count = int(truth.max()) + 1
        self.models = self.base_model().expand(count, -1).clone()
        self.assign[clients] = truth[clients]
        return {}

    def place_newcomers(self, clients, round_index):
        self.assign[clients] = self.ctx.true_clusters()[clients]

    def run_round(self, round_index, participants):
        self.assign[participants] = self.ctx.true_clusters()[participants]  # follows data shifts
        self.models, train_loss = self.engine.train_and_aggregate(
            self.models, participants, self.assign[participants], round_index,
            weighting=self.opts.weighting)
        return RoundOutcome("training", None, train_loss)
