"""FedSoft (Ruan & Joe-Wong, "FedSoft: Soft clustered federated learning with proximal local updating",
AAAI 2022): soft clustering, each client a mixture of the cluster distributions.

S = `--models` cluster models c_1..c_S, and every client keeps a personal model w_k of its own (it never
leaves the client between rounds). Every `estimation_interval` rounds (from round 0) each participant
estimates its importance weights: it evaluates the S cluster models on each of its training samples, counts
n_ks = how many samples cluster s fits best (lowest loss; ties to the lowest index), and sends
u_ks = max(n_ks / n_k, sigma) renormalised to sum 1 (`smoother` sigma keeps every cluster reachable). Between
estimations a client keeps its weights. These are the membership weights recorded per round
(`extras.memberships`, one row per client): a client whose data mixes two clusters sits between them.

Every round each participant receives the S cluster models and trains its personal model from where it
left it, on its loss plus the proximal term lambda/2 * sum_s u_ks ||w - c_s||^2 (`reg_weight` lambda). With
weights summing to 1 this is exactly the engine's proximal term with mu = lambda and the anchor
sum_s u_ks c_s. Then the server rebuilds each cluster model from the trained personal models:
c_s = sum_k v_sk w_k with v_sk = u_ks n_k / sum_j u_js n_j (the importance of each client to cluster s), or,
with `selection_size` m, each cluster draws m participants with probabilities v_s (without replacement)
and becomes their plain mean (only the drawn clients train that round; the paper's client selection).

A client's cluster (what ARI scores) is its largest weight. `evaluate_on`: `personal` tests each client on
its personal model (the paper's personalised accuracy), `cluster` on the cluster model of its largest weight.
A newcomer estimates its weights on the current cluster models and starts its personal model from the
run's initial model (as every client did at set-up).

Where the authors' code (ycruan/FedSoft) differs: it leaves the smoothed weights unnormalised (a cluster
that wins no sample gets sigma, so the weights sum to 1 + a few sigma; here they sum to 1:
`normalise=false` keeps the code's form); it estimates every client's weights, selected or not (here the
participants', the same under full participation); its clients keep one Adam optimiser for the whole run
(`optimizer_state=persistent`; every algorithm's default is a fresh optimiser per round); and its server
loop calls `estimate_importance_weights('fedsoft')` on a method that takes no argument, which raises a
TypeError before the first round: the rule here is the one the method's body and the paper describe.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..engine.objective import Objective
from ..engine.training import OptimizerMemory
from ..errors import ConfigError
from ..settings import Choice, Interval, setting
from .base import Algorithm, InitOptions, RoundOutcome

EVALUATE_ON = ("personal", "cluster")
OPTIMIZER_STATES = ("reset", "persistent")


@dataclass(frozen=True)
class FedSoftOptions(InitOptions):
    reg_weight: float = setting(0.1, Interval(0), label="Proximal weight (lambda)", step=0.01,
                                help="local loss + lambda/2 sum_s u_s ||w - c_s||^2 (the authors' MNIST value 0.1)")
    estimation_interval: int = setting(1, Interval(1), label="Estimate weights every (rounds)",
                                       help="tau: the importance weights are re-estimated every this many rounds")
    smoother: float = setting(1e-4, Interval(0, 1, high_open=True), label="Smoother (sigma)", step=0.0001,
                              allowed_text="a share in [0, 1)",
                              help="least weight of a cluster that fits none of a client's samples")
    normalise: bool = setting(True, label="Weights sum to 1",
                              help="renormalise the smoothed weights (the authors' code leaves them summing to "
                                   "slightly more than 1)")
    selection_size: int | None = setting(None, Interval(1), label="Clients drawn per cluster",
                                         none_means="every participant, weighted by importance",
                                         help="each cluster draws this many participants by importance and "
                                              "averages them (the paper's selection; the authors' CIFAR run: 15)")
    evaluate_on: str = setting("personal", Choice(EVALUATE_ON), label="Test each client on",
                               help="personal: its own proximal model; cluster: the cluster model of its largest "
                                    "weight")
    optimizer_state: str = setting("reset", Choice(OPTIMIZER_STATES), label="Client optimiser state",
                                   help="reset: a fresh optimiser every round; persistent: each client keeps its "
                                        "optimiser state for the whole run (the authors' code)")

    def check(self, cfg) -> None:
        super().check(cfg)
        if self.selection_size is not None and self.selection_size > cfg.num_clients:
            raise ConfigError("options.selection_size", self.selection_size,
                              f"at most the number of clients ({cfg.num_clients})")


def importance_weights(losses: torch.Tensor, valid: torch.Tensor, smoother: float, normalise: bool) -> torch.Tensor:
    """u [P, S] from per-sample losses [P, n, S]: the share of a client's samples each cluster fits best, at least
    `smoother`, renormalised to sum 1 when asked."""
    best = torch.argmin(losses, dim=2)  # first minimum on ties
    wins = torch.nn.functional.one_hot(best, losses.shape[2]).to(torch.float64) * valid[..., None].to(torch.float64)
    n = valid.sum(1, keepdim=True).clamp(min=1).to(torch.float64)
    shares = wins.sum(1) / n
    shares = torch.where(shares > 0, shares, torch.full_like(shares, smoother))  # sigma where a cluster wins nothing
    return (shares / shares.sum(1, keepdim=True) if normalise else shares).to(torch.float32)


def cluster_importance(u: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """v [S, P]: each cluster's aggregation weights over the clients, u_ks n_k normalised over k."""
    mass = (u * n[:, None]).T.to(torch.float64)
    return (mass / mass.sum(1, keepdim=True).clamp(min=1e-12)).to(torch.float32)


class FedSoft(Algorithm):
    name = "fedsoft"
    label = "FedSoft"
    summary = "Soft clusters: each client a mixture of cluster models, trained proximally towards all of them."
    needs_models = True
    uses_init_mode = True
    one_model_per_client = True  # a personal model per client besides the S cluster models
    model_aggregation_because = "its clients send their trained personal models, which the clusters average"
    Options = FedSoftOptions
    state_classes = (OptimizerMemory,)  # optimizer_state=persistent keeps one per client

    def setup(self, clients):
        fed = self.ctx.fed
        self.models, extras = self.initial_models(self.num_models, clients)
        self.personal = self.base_model().expand(fed.num_clients, -1).clone()
        self.memberships = torch.full((fed.num_clients, self.models.shape[0]), float("nan"))
        self.memory = None
        if self.opts.optimizer_state == "persistent":
            self.memory = OptimizerMemory.zeros(fed.num_clients, self.ctx.spec.dim, self.engine.train_cfg.optimizer,
                                                fed.device)
        return extras

    def _estimate(self, clients: torch.Tensor) -> None:
        losses, valid = self.engine.sample_losses(self.models, clients)
        u = importance_weights(losses, valid, self.opts.smoother, self.opts.normalise).cpu()
        self.memberships[clients] = self.engine.upload(u)
        self.assign[clients] = torch.argmax(u, dim=1)

    def place_newcomers(self, clients, round_index):
        self._estimate(clients)

    def run_round(self, round_index, participants):
        device = self.ctx.fed.device
        stale = torch.isnan(self.memberships[participants, 0])
        if round_index % self.opts.estimation_interval == 0 or bool(stale.any()):
            self._estimate(participants if round_index % self.opts.estimation_interval == 0
                           else participants[stale])
        u = self.memberships[participants]
        trainers, drawn = self._select(round_index, participants, u)
        u_t = self.memberships[trainers]
        anchor = (u_t / u_t.sum(1, keepdim=True)).to(device) @ self.models.to(device)
        mu = self.opts.reg_weight * (1.0 if self.opts.normalise else float(u_t.sum(1).mean()))
        objective = Objective(prox_mu=mu, anchor=anchor) if mu else None
        own = self.personal.to(device)[trainers.to(device)]
        trained, train_loss = self.engine.train_personal(own, trainers, round_index, self.models, objective,
                                                         memory=self.memory)
        self.personal[trainers] = trained.to(self.personal.device)
        self.models = self._aggregate(trainers, trained, drawn)
        extras = {"memberships": [None if torch.isnan(row[0]) else [round(float(v), 4) for v in row]
                                  for row in self.memberships]}
        if drawn is not None:
            extras["drawn"] = [[int(c) for c in trainers[pos]] for pos in drawn]
        loss = torch.full((len(participants),), float("nan"))
        where = torch.searchsorted(participants, trainers)
        loss[where] = train_loss.cpu()
        return RoundOutcome("clustering", None, loss, extras)

    def _select(self, round_index: int, participants: torch.Tensor, u: torch.Tensor):
        """(clients that train, per cluster the positions in them it averages, or None without selection)."""
        m = self.opts.selection_size
        if m is None:
            return participants, None
        v = cluster_importance(u, self.engine.weights(participants).cpu()).double().numpy()
        rng = self.rng("select", round_index)
        picks = []
        for s in range(v.shape[0]):
            p = v[s] / v[s].sum() if v[s].sum() > 0 else np.full(len(participants), 1 / len(participants))
            size = min(m, int((p > 0).sum()))
            picks.append(rng.choice(len(participants), size=size, replace=False, p=p))
        chosen = np.unique(np.concatenate(picks))
        trainers = participants[torch.as_tensor(chosen, dtype=torch.int64)]
        where = {int(c): i for i, c in enumerate(chosen)}
        return trainers, [torch.as_tensor([where[int(c)] for c in pick], dtype=torch.int64) for pick in picks]

    def _aggregate(self, trainers: torch.Tensor, trained: torch.Tensor, drawn) -> torch.Tensor:
        device = trained.device
        if drawn is not None:  # each cluster: the plain mean of the clients it drew
            return torch.stack([trained[pos.to(device)].mean(0) for pos in drawn])
        v = cluster_importance(self.memberships[trainers], self.engine.weights(trainers).cpu()).to(device)
        new = v @ trained
        # a cluster no trainer holds any weight on keeps its model
        held = v.sum(1) > 0
        return torch.where(held[:, None], new, self.models.to(device))

    def eval_models(self):
        return self.models, self.assign

    def evaluate(self, clients):
        if self.opts.evaluate_on == "cluster":
            return self.engine.evaluate(self.models, self.assign[clients], clients)
        return self.engine.evaluate(self.personal, clients, clients)
