"""FedRC (Guo, Tang & Lin, "FedRC: Tackling diverse distribution shifts challenge in federated learning by
robust clustering", ICML 2024): soft clustering that separates concept shifts and keeps feature and label
shifts together.

K = `--models` cluster models theta_k. Each client i keeps mixture weights omega_i (uniform at first). Every
round each participant receives the K models and, on its own training samples (x_j, y_j):
1. E-step: gamma_jk = softmax_k( log omega_ik - loss_k(x_j, y_j) - log P_k(y_j) ), where exp(-loss) stands
   for P_k(y | x) and P_k(y) is cluster k's label marginal (below): the score is P_k(y|x) / P_k(y), the
   robust objective's I(x, y; theta_k) = P(x, y) / (P(x) P(y)). Dividing by the label marginal is what keeps
   clients that differ only in their label mix (label shift) in one cluster, and scoring P(y|x) ignores where
   the inputs lie (feature shift); a different P(y|x) (concept shift) is what moves a sample's weight;
2. omega_ik = mean over its samples of gamma_jk (the client's cluster memberships);
3. it trains EVERY model k on its samples weighted by gamma_jk (the engine's per-sample weights; the loss is
   mean_j gamma_jk loss_k(x_j, y_j)) and sends the K trained models back;
4. it sends its soft label counts per cluster, sum of gamma_jk over its samples of each class (K x C floats).
The server averages each model k over the participants (by sample count, `weighting`) and sets
P_k(y) = the label counts summed over every client that has reported (at least 1e-8, normalised over y).
Before the first report every P_k is uniform, so the first E-step is FedEM's.

A client's cluster (what ARI scores and what it is tested on) is its largest omega; its record carries
`extras.memberships` (omega per client). A newcomer runs one E-step from uniform weights on the current
models (the authors' treatment of their test clients).

Where the authors' code (LINs-lab/FedRC) differs: by default its clients predict with the omega-weighted
mixture of the K models' probabilities (`--hard_cluster` switches to the largest weight, which is what CFL
Lab does for every clustered algorithm: one model per client); its clients hold stale label counts when not
sampled (the same here: the latest report of each client counts). The paper text was not re-checked here;
the rules above are the code's (`client.py: FedRC`, `aggregator.py: CentralizedAggregator`,
`run_experiment.py`: the label marginals), read outside this repository.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..engine.aggregate import grouped_weighted_mean
from ..engine.objective import Objective
from ..settings import Interval, setting
from .base import Algorithm, InitOptions, RoundOutcome

LABEL_FLOOR = 1e-8  # the authors' floor on a cluster's label share before normalising


@dataclass(frozen=True)
class FedRCOptions(InitOptions):
    label_term: bool = setting(True, label="Divide by the label marginal",
                               help="the robust score P(y|x)/P_k(y); off: FedEM's P(y|x) alone, which splits "
                                    "clients by their label mix")
    record_memberships_max: int = setting(1000, Interval(0), label="Record memberships up to",
                                          help="record every client's mixture weights up to this many clients")


def responsibilities(losses: torch.Tensor, valid: torch.Tensor, log_omega: torch.Tensor,
                     log_label: torch.Tensor | None) -> torch.Tensor:
    """gamma [P, n, K] from per-sample losses [P, n, K], log mixture weights [P, K] and, for the robust score,
    log P_k(y_j) per sample [P, n, K]; padding rows are 0."""
    score = log_omega[:, None, :] - losses
    if log_label is not None:
        score = score - log_label
    return torch.softmax(score, dim=2) * valid[..., None].to(losses.dtype)


class FedRC(Algorithm):
    name = "fedrc"
    label = "FedRC"
    summary = "Soft clusters by P(y|x)/P(y): concept shifts separate, label and feature shifts stay together."
    needs_models = True
    uses_init_mode = True
    needs_labels = True
    model_aggregation_because = "its clients send every model trained on their weighted samples"
    Options = FedRCOptions

    def setup(self, clients):
        fed = self.ctx.fed
        self.models, extras = self.initial_models(self.num_models, clients)
        k = self.models.shape[0]
        self.omega = torch.full((fed.num_clients, k), 1.0 / k)
        self.label_counts = torch.zeros(fed.num_clients, k, fed.num_classes)  # the latest report of each client
        self._e_step(clients)  # a client's cluster from the start (not trained yet: no label counts sent)
        return extras

    def _label_marginals(self) -> torch.Tensor:
        """P_k(y) [K, C]: uniform until a client has reported."""
        totals = self.label_counts.sum(0).double()
        if float(totals.sum()) == 0:
            return torch.full(totals.shape, 1.0 / totals.shape[1])
        totals = totals.clamp(min=LABEL_FLOOR)
        return (totals / totals.sum(1, keepdim=True)).float()

    def _e_step(self, clients: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """gamma [P, n, K] and valid [P, n] of these clients on the current models; omega and the cluster updated."""
        device = self.ctx.fed.device
        losses, valid = self.engine.sample_losses(self.models, clients)
        log_label = None
        if self.opts.label_term:
            y = self.ctx.fed.y_train[clients.to(device)].clamp(min=0)  # [P, n]
            log_p = self._label_marginals().to(device).log()  # [K, C]
            log_label = log_p[:, y].permute(1, 2, 0)  # [P, n, K]
        gamma = responsibilities(losses, valid, self.omega[clients].to(device).log(), log_label)
        n = valid.sum(1, keepdim=True).clamp(min=1).to(gamma.dtype)
        self.omega[clients] = (gamma.sum(1) / n).cpu()
        self.assign[clients] = torch.argmax(self.omega[clients], dim=1)
        return gamma, valid

    def place_newcomers(self, clients, round_index):
        self._e_step(clients)

    def run_round(self, round_index, participants):
        device = self.ctx.fed.device
        k = self.models.shape[0]
        gamma, valid = self._e_step(participants)
        # every participant trains each of the K models on its samples weighted by gamma[..., k]
        copies = participants.repeat_interleave(k)
        model_of = torch.arange(k).repeat(len(participants))
        weights = gamma.permute(0, 2, 1).reshape(len(copies), -1)
        trained, loss = self.engine.federated_train(self.models, copies, model_of, round_index,
                                                    objective=Objective(sample_weights=weights))
        w = self.engine.weights(copies, self.opts.weighting)
        self.models = grouped_weighted_mean(trained, model_of.to(device), w, self.models.to(device))
        # the soft label counts each participant sends: sum of gamma over its samples of each class
        y = self.ctx.fed.y_train[participants.to(device)].clamp(min=0)
        onehot = torch.nn.functional.one_hot(y, self.ctx.fed.num_classes).to(gamma.dtype) * valid[..., None]
        counts = torch.einsum("pnk,pnc->pkc", gamma, onehot).cpu()
        self.label_counts[participants] = self.engine.upload(counts.reshape(len(participants), -1)).view_as(counts)
        train_loss = (loss.view(len(participants), k) * self.omega[participants]).sum(1)
        extras = {}
        if self.ctx.fed.num_clients <= self.opts.record_memberships_max:
            extras["memberships"] = [None if int(self.assign[c]) < 0 else [round(float(v), 4) for v in row]
                                     for c, row in enumerate(self.omega)]
        return RoundOutcome("clustering", None, train_loss, extras)
