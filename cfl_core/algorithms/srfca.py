"""SR-FCA (Vardhan, Ghosh & Mazumdar, "An improved federated clustering algorithm with model-based
clustering", arXiv 2301.10207): successive refinement from local models, no K and no initial models needed.

1. INIT (rounds 0 .. `init_rounds` - 1): every participant trains a model of its own, alone (nothing is sent).
   After the last INIT round the present clients send their local models; each receives all of them and
   sends its loss on each (`dist=cross-entropy`, the authors' MNIST setting), so the server has
   dist(i, j) = (loss of w_i on client j + loss of w_j on client i) / 2 for every pair; `dist=euclidean`
   uses ||w_i - w_j|| instead (no losses needed). Pairs at most the threshold lambda apart are joined in a
   graph and clustered by correlation clustering with random pivots (a random client and its neighbours form
   a cluster, removed, repeat). Clusters smaller than `min_cluster_size` are dissolved: their clients join the
   surviving cluster of smallest mean distance (all clients form one cluster if none survives). Each
   cluster's model starts as the sample-weighted mean of its members' local models.
2. Every round after INIT: FedAvg inside each cluster (`trim` > 0: the coordinate-wise trimmed mean, which
   drops the `trim` share of largest and smallest values of each parameter, the paper's robust aggregation).
3. REFINE, after every `refine_every` rounds of (2), `refine_steps` times (or until the run ends when unset):
   RECLUSTER: each present client joins the cluster c of smallest dist(c, i) = (loss of cluster model c on
   client i + mean loss of client i's local model on c's members) / 2 (||theta_c - w_i|| under euclidean;
   a client without a local model, a newcomer, uses the first term alone); clusters left with fewer than
   `min_cluster_size` clients are dissolved into their clients' next-nearest cluster. MERGE: clusters whose
   models are at most lambda apart (the same symmetric distance between cluster models on each other's
   members) are joined by correlation clustering again; a merged cluster's model is the size-weighted mean.
The number of clusters is never given (`--models` is ignored); it is what the threshold leaves.

lambda: `threshold` when given; else `threshold_quantile` q, the q-quantile of the INIT distances (the
authors' `dist_fraction`); else (CFL Lab's default) the two-means split of the sorted INIT distances, the cut
that leaves the least squared spread within the near and the far group, halfway between them: near pairs
(same cluster) and far pairs are told apart without knowing how many clusters there are.

Where the authors' code (harshv834/sr-fca) differs: it keeps INIT clusters of MORE than `size_threshold`
clients but RECLUSTER ones of at least that many (here at least `min_cluster_size` both times); it leaves the
clients of a dissolved cluster untrained and unscored (here they join the nearest surviving cluster); each
REFINE step trains every cluster's model again from a newly built model for a fixed number of rounds, and a
merged cluster's first model is new as well (here models continue through RECLUSTER and MERGE); it samples
`num_clients_per_round` clients per cluster round (here the run's participation).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..engine.aggregate import grouped_weighted_mean, trimmed_mean, weighted_mean
from ..errors import ConfigError
from ..settings import Choice, Interval, setting
from .base import Algorithm, RoundOutcome, WeightingOptions

DISTANCES = ("cross-entropy", "euclidean")


@dataclass(frozen=True)
class SRFCAOptions(WeightingOptions):
    init_rounds: int = setting(5, Interval(1), label="INIT rounds (local training)",
                               help="rounds every client trains alone before the first clustering")
    dist: str = setting("cross-entropy", Choice(DISTANCES), label="Distance",
                        help="cross-entropy: symmetric loss of each model on the other's data (the authors' "
                             "MNIST setting); euclidean: parameter distance")
    threshold: float | None = setting(None, Interval(0), label="Threshold (lambda)", step=0.05,
                                      none_means="from the INIT distances",
                                      help="clients or clusters at most this far apart are joined")
    threshold_quantile: float | None = setting(None, Interval(0, 1), label="Threshold quantile", step=0.05,
                                               none_means="two-means split",
                                               help="lambda = this quantile of the INIT distances (the authors' "
                                                    "dist_fraction)")
    min_cluster_size: int = setting(2, Interval(1), label="Least cluster size",
                                    help="smaller clusters are dissolved into their clients' nearest cluster")
    refine_every: int = setting(5, Interval(1), label="Rounds between REFINE steps",
                                help="cluster rounds before each RECLUSTER + MERGE")
    refine_steps: int | None = setting(2, Interval(0), label="REFINE steps", none_means="until the run ends",
                                       help="how many RECLUSTER + MERGE steps (the authors: 2)")
    trim: float = setting(0.0, Interval(0, 0.5), label="Trimmed share (beta)", step=0.05,
                          allowed_text="a share in [0, 0.5]",
                          help="coordinate-wise trimmed mean within a cluster: drop this share at each end "
                               "(0: weighted mean; a share that leaves at most one value: the plain mean, as the "
                               "authors' code)")

    def check(self, cfg) -> None:
        super().check(cfg)
        if self.threshold is not None and self.threshold_quantile is not None:
            raise ConfigError("options.threshold_quantile", self.threshold_quantile,
                              "unset when options.threshold is given (one way to set lambda)")


# -- pure functions (tested on their own) ----------------------------------------------------------

def two_means_threshold(distances: np.ndarray) -> float:
    """The cut of the sorted values with the least squared spread within the two groups, halfway between them."""
    d = np.sort(np.asarray(distances, dtype=np.float64))
    if len(d) < 2:
        return float(d[0]) if len(d) else 0.0
    best, cut = np.inf, 1
    for i in range(1, len(d)):
        spread = ((d[:i] - d[:i].mean()) ** 2).sum() + ((d[i:] - d[i:].mean()) ** 2).sum()
        if spread < best:
            best, cut = spread, i
    return float((d[cut - 1] + d[cut]) / 2)


def correlation_clusters(near: np.ndarray, rng) -> list[list[int]]:
    """Pivot clustering of a graph (`near` [n, n] bool adjacency): a random remaining node and its remaining
    neighbours form a cluster, until none remain. Clusters as sorted positions."""
    left = set(range(len(near)))
    out = []
    while left:
        order = sorted(left)
        pivot = order[int(rng.integers(0, len(order)))]
        members = sorted({pivot} | {j for j in left if near[pivot, j]})
        out.append(members)
        left -= set(members)
    return out


def symmetric(loss: np.ndarray, rows: list[list[int]]) -> np.ndarray:
    """dist(a, b) = (mean loss of model a on b's clients + mean loss of model b on a's clients) / 2, from
    loss [clients, models] and each model's clients `rows`."""
    k = len(rows)
    cross = np.array([[loss[rows[b], a].mean() for b in range(k)] for a in range(k)])  # model a on b's clients
    return (cross + cross.T) / 2


class SRFCA(Algorithm):
    name = "srfca"
    label = "SR-FCA"
    summary = "Clusters local models by a distance threshold, then refines: recluster and merge, no K needed."
    model_aggregation_because = "its cluster models average the clients' trained models"
    local_phases = ("init",)  # INIT: each client trains its own model alone; it is uploaded once, at the clustering
    Options = SRFCAOptions

    def setup(self, clients):
        fed = self.ctx.fed
        base = self.base_model()
        self.local = base.expand(fed.num_clients, -1).clone()  # INIT's local models (kept for RECLUSTER)
        self.models = self.local  # during INIT every client tests its own model
        self.assign[clients] = clients
        self.has_local = torch.zeros(fed.num_clients, dtype=torch.bool)
        self.local_loss = torch.full((fed.num_clients, fed.num_clients), float("nan"))  # [on client j, model i]
        self.clustered = False
        self.threshold = None
        self.refines = 0
        self.rounds_since = 0
        return {}

    def place_newcomers(self, clients, round_index):
        if not self.clustered:
            self.assign[clients] = clients  # its own model, trained alone until the INIT clustering
            return
        dist = self._client_distances(clients)
        self.assign[clients] = torch.as_tensor(dist.argmin(1), dtype=torch.int64)

    # -- one round ------------------------------------------------------------------------------------
    def run_round(self, round_index, participants):
        extras: dict = {}
        if not self.clustered:
            own = self.local.to(self.ctx.fed.device)[participants.to(self.ctx.fed.device)]
            trained, loss = self.engine.client_update(own, participants, round_index)  # alone: nothing is sent
            self.local = self.local.clone()
            self.local[participants] = trained.to(self.local.device)
            self.has_local[participants] = True
            self.models = self.local
            if round_index + 1 >= self.opts.init_rounds:
                self._init_clustering(round_index, extras)
                return RoundOutcome("clustering", None, loss, extras)
            return RoundOutcome("init", None, loss, extras)
        models, loss = self._cluster_round(round_index, participants)
        self.models = models
        self.rounds_since += 1
        phase = "training"
        steps = self.opts.refine_steps
        if self.rounds_since >= self.opts.refine_every and (steps is None or self.refines < steps):
            self._refine(round_index, extras)
            phase = "clustering"
        extras["clusters"] = int(self.models.shape[0])
        return RoundOutcome(phase, None, loss, extras)

    def _cluster_round(self, round_index, participants):
        device = self.ctx.fed.device
        owners = self.assign[participants]
        trained, loss = self.engine.federated_train(self.models, participants, owners, round_index)
        if not self.opts.trim:
            weights = self.engine.weights(participants, self.opts.weighting)
            return grouped_weighted_mean(trained, owners.to(device), weights, self.models.to(device)), loss
        new = self.models.to(device).clone()
        for k in torch.unique(owners).tolist():
            new[k] = trimmed_mean(trained[(owners == k).nonzero().squeeze(1).to(device)], self.opts.trim)
        return new, loss

    # -- INIT clustering ------------------------------------------------------------------------------
    def _present(self) -> torch.Tensor:
        return torch.nonzero(self.has_local).squeeze(1)

    def _init_clustering(self, round_index: int, extras: dict) -> None:
        clients = self._present()
        # every client sends its local model (trained from the run's initial model: the update the conditions see)
        sent = self.engine.upload_models(self.base_model().expand(len(clients), -1), self.local[clients], clients)
        if self.opts.dist == "cross-entropy":
            losses = self.engine.loss_matrix(sent, clients, uploads=True)  # [on client j, model i]
            self.local_loss[clients[:, None], clients[None, :]] = losses
            d = ((losses + losses.T) / 2).double().numpy()
        else:
            d = torch.cdist(sent.double(), sent.double()).cpu().numpy()
        pairs = d[np.triu_indices(len(d), k=1)]
        o = self.opts
        if o.threshold is not None:
            self.threshold = float(o.threshold)
        elif o.threshold_quantile is not None:
            self.threshold = float(np.quantile(pairs, o.threshold_quantile)) if len(pairs) else 0.0
        else:
            self.threshold = two_means_threshold(pairs)
        groups = correlation_clusters(d <= self.threshold, self.rng("init-pivots"))
        groups = self._dissolve_small(groups, d)
        ids = clients.tolist()
        weights = self.engine.weights(clients, self.opts.weighting)
        rows = [torch.as_tensor(g) for g in groups]
        self.models = torch.stack([weighted_mean(sent[r.to(sent.device)], weights[r.to(weights.device)])
                                   for r in rows])
        for k, g in enumerate(groups):
            self.assign[torch.as_tensor([ids[p] for p in g], dtype=torch.int64)] = k
        self._place_others(clients)
        self.clustered = True
        extras.update(threshold=round(self.threshold, 5), clusters=len(groups),
                      init_distances=np.round(d, 4).tolist() if len(d) <= 100 else None)

    def _dissolve_small(self, groups: list[list[int]], d: np.ndarray) -> list[list[int]]:
        """Clusters of at least min_cluster_size; the others' members join the surviving cluster of smallest mean
        distance (one cluster of all when none survives)."""
        keep = [g for g in groups if len(g) >= self.opts.min_cluster_size]
        if not keep:
            return [sorted(p for g in groups for p in g)]
        for g in groups:
            if len(g) >= self.opts.min_cluster_size:
                continue
            for p in g:
                nearest = int(np.argmin([d[p, k].mean() for k in keep]))
                keep[nearest] = sorted(keep[nearest] + [p])
        return keep

    def _place_others(self, present: torch.Tensor) -> None:
        """Joined clients that never trained in INIT (partial participation): nearest cluster by loss."""
        joined = torch.nonzero(self.assign >= 0).squeeze(1)
        others = joined[~torch.isin(joined, present)]
        if len(others):
            dist = self._client_distances(others)
            self.assign[others] = torch.as_tensor(dist.argmin(1), dtype=torch.int64)

    # -- REFINE: recluster, then merge ---------------------------------------------------------------------
    def _client_distances(self, clients: torch.Tensor) -> np.ndarray:
        """dist(cluster c, client i) [P, K] (see the module docstring)."""
        k = self.models.shape[0]
        if self.opts.dist == "euclidean":
            d = torch.cdist(self.local[clients].double(), self.models.cpu().double()).numpy()
            fresh = ~self.has_local[clients].numpy()
            if fresh.any():  # no local model: the loss of each cluster model stands in
                d[fresh] = self.engine.loss_matrix(self.models, clients[fresh], uploads=True).double().numpy()
            return d
        on_client = self.engine.loss_matrix(self.models, clients, uploads=True).double().numpy()  # [P, K]
        members = [torch.nonzero((self.assign == c) & self.has_local).squeeze(1) for c in range(k)]
        d = on_client.copy()
        for i, c in enumerate(clients.tolist()):
            if not bool(self.has_local[c]):
                continue
            for j in range(k):
                if len(members[j]):
                    d[i, j] = (on_client[i, j] + float(self.local_loss[members[j], c].mean())) / 2
        return d

    def _refine(self, round_index: int, extras: dict) -> None:
        self.refines += 1
        self.rounds_since = 0
        clients = torch.nonzero(self.assign >= 0).squeeze(1)
        dist = self._client_distances(clients)
        choice = dist.argmin(1)
        sizes = np.bincount(choice, minlength=dist.shape[1])
        alive = np.flatnonzero(sizes >= self.opts.min_cluster_size)
        if len(alive) == 0:
            alive = np.array([int(sizes.argmax())])
        choice = alive[dist[:, alive].argmin(1)]
        moved = int((torch.as_tensor(choice) != self.assign[clients]).sum())
        # MERGE: clusters whose models are close on each other's members
        alive = sorted(set(choice.tolist()))
        rows = [np.flatnonzero(choice == c).tolist() for c in alive]
        loss = self.engine.loss_matrix(self.models[alive], clients, uploads=True).double().numpy()
        between = symmetric(loss, rows)
        groups = correlation_clusters(between <= self.threshold, self.rng("merge-pivots", round_index))
        sizes_t = torch.as_tensor([float(self.engine.weights(clients[r], self.opts.weighting).sum()) for r in rows])
        new_models, new_of = [], {}
        for g, members in enumerate(groups):
            idx = torch.as_tensor([alive[m] for m in members])
            new_models.append(weighted_mean(self.models[idx.to(self.models.device)],
                                            sizes_t[members].to(self.models.device)))
            for m in members:
                new_of[alive[m]] = g
        self.models = torch.stack(new_models)
        self.assign[clients] = torch.as_tensor([new_of[int(c)] for c in choice], dtype=torch.int64)
        extras.update(refine_step=self.refines, moved=moved, merged=len(alive) - len(groups))
