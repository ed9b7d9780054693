"""FedAvg: one global model for everyone — what non-IID data breaks."""
from __future__ import annotations

from .base import Algorithm, RoundOutcome, WeightingOptions


class FedAvg(Algorithm):
    name = "fedavg"
    label = "FedAvg"
    summary = "One global model averaged over all clients (the non-clustered baseline)."
    Options = WeightingOptions

    def setup(self, clients):
        self.models = self.base_model()[None].clone()
        self.assign[:] = 0
        return {}

    def place_newcomers(self, clients, round_index):
        self.assign[clients] = 0

    def objective(self):
        """What the clients' local training adds to their loss (None: plain; FedProx: a proximal term)."""
        return None

    def run_round(self, round_index, participants):
        self.models, train_loss = self.engine.train_and_aggregate(
            self.models, participants, self.assign[participants], round_index, objective=self.objective(),
            weighting=self.opts.weighting)
        return RoundOutcome("training", None, train_loss)
