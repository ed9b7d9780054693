"""CLoVE (Bhatia et al.): cluster clients by the vector of their losses on all current models.

Each round while clustering:
1. every participant reports its loss on each of the K-hat models (its loss vector);
2. KMeans groups the loss vectors (K given, or chosen by silhouette when unknown);
3. clusters are matched to models by the minimum-cost assignment, the cost of
   (cluster, model) being the summed loss of the cluster's clients on the model
   (a model no cluster is matched to is left untouched this round);
4. each client trains the model of its cluster; models average their clients.
A client is stable once its model has not changed for `stable_rounds` rounds;
when `stable_share` of the participants are stable, clustering stops: the
assignment freezes and no more loss vectors are computed or sent. A newcomer
after that sends one loss vector and joins the nearest cluster centre.

Why it survives a bad initialisation: even when all models are equal or bad,
clients of the same cluster have similar loss vectors, and the matching keeps
model identities consistent from round to round.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

from ..engine.seeding import derive_seed
from ..errors import ConfigError
from ..settings import Choice, Interval, setting
from .base import Algorithm, InitOptions, RoundOutcome

FIRST_ASSIGNMENTS = ("random", "evaluation")
K_RULES = ("centred", "authors")
MATCH_ON = ("embedding", "raw")
AUTHORS_K_MARGIN = 1.10  # the authors' code: a larger K must score more than 1.10 x the best so far


@dataclass(frozen=True)
class CloveOptions(InitOptions):
    k: int | None = setting(None, Interval(1), label="Clusters (K)", none_means="K = models",
                            help="clusters for KMeans when K is known")
    unknown_k: bool = setting(False, label="Unknown K",
                              help="choose the number of clusters by silhouette over 1..K-hat each round")
    sqrt_losses: bool = setting(False, label="Square-root losses (SLV)",
                                help="the paper's SLV variant: cluster the square roots of the losses")
    first_assignment: str = setting("random", Choice(FIRST_ASSIGNMENTS), label="First assignment",
                                    help="round 0: random models, or cluster the initial models' losses")
    cover_models: bool = setting(True, label="Random start: every model gets a client",
                                 help="first_assignment=random: when a draw leaves a model without a client, "
                                      "move a random client of a model that has several to it (needs at "
                                      "least K participants)")
    stable_rounds: int = setting(3, Interval(1), label="Stable after (unchanged rounds)",
                                 help="a client is stable once its model has not changed for this many rounds")
    stable_after: int | None = setting(None, Interval(1), label="Stable after (identical assignments)",
                                       none_means="stable_rounds + 1",
                                       help="the authors' count: a client is stable after this many identical "
                                            "consecutive assignments (their code: 3); overrides stable_rounds")
    freeze: bool = setting(True, label="Freeze once stable",
                           help="stop clustering once stable_share of the participants are stable (the paper's "
                                "accuracy tables ran without it)")
    match_on: str = setting("embedding", Choice(MATCH_ON), label="Matching cost on",
                            help="embedding: the cost sums what was clustered (square roots under SLV, as the "
                                 "authors' code); raw: the plain losses")
    stable_share: float = setting(1.0, Interval(0, 1, low_open=True), label="Stable share", step=0.05,
                                  allowed_text="a share in (0, 1]",
                                  help="clustering stops once this share of the participants is stable")
    k_rule: str = setting("centred", Choice(K_RULES), label="Unknown-K rule",
                          help="centred: KMeans silhouette on row-centred loss vectors, K = 1 allowed (CFL Lab, "
                               "measured better); authors: Ward-linkage silhouette on the loss vectors, K >= 2, a "
                               "larger K only if it scores > 1.10 x the best so far (the authors' code)")
    min_silhouette: float = setting(0.5, Interval(-1, 1), label="Least silhouette", step=0.05,
                                    allowed_text="a silhouette score in [-1, 1]",
                                    help="unknown K: below this best score the clients form one cluster")
    silhouette_tolerance: float = setting(0.01, Interval(0), label="Silhouette tolerance", step=0.01,
                                          help="unknown K: prefer the smallest K within this of the best score")

    def check(self, cfg) -> None:
        super().check(cfg)
        k_hat = cfg.models or 0
        if self.k is not None and not 1 <= self.k <= k_hat:
            raise ConfigError("options.k", self.k, f"a number of clusters in [1, models={k_hat}], or none for K = models")


def choose_k(embedding: np.ndarray, k_max: int, seed: int, min_score: float, tolerance: float
             ) -> tuple[int, dict[int, float]]:
    """Number of clusters when K is unknown.

    Scored on row-centred loss vectors (each client's mean loss over the models
    subtracted): a client that is simply harder or easier than others shifts
    all its losses alike, which is not cluster structure, and on IID data that
    offset alone gives a two-cluster silhouette near 0.5.
    Silhouette scores for k = 2..k_max; if even the best is below `min_score`
    the clients form one cluster (k = 1). Otherwise the smallest k whose score
    is within `tolerance` of the best: more clusters must be clearly better.
    Measured on digits (seeds 0-5): IID stays at k = 1 in almost every round;
    with 4 true clusters the rule finds 4 in most runs, but when two clusters
    look alike in the first round it settles on fewer (see the README).
    """
    embedding = embedding - embedding.mean(axis=1, keepdims=True)
    n = len(embedding)
    scores: dict[int, float] = {}
    for k in range(2, min(k_max, n - 1) + 1):
        labels = KMeans(k, n_init=10, random_state=seed % 2**31).fit_predict(embedding)
        if len(set(labels)) < 2:
            continue
        scores[k] = float(silhouette_score(embedding, labels))
    if not scores or max(scores.values()) < min_score:
        return 1, scores
    best = max(scores.values())
    return min(k for k, s in scores.items() if s >= best - tolerance), scores


def cover_every_model(assignment: torch.Tensor, k: int, rng) -> list[int]:
    """Give every model at least one client (in place) when there are at least k clients.

    For each model without a client, in increasing order, a client is drawn uniformly among those whose
    model has two or more and moved to it; returns the positions moved. (The authors' repair overwrites a
    random position, which can empty another model: their random start then still misses a model in about
    1 draw in 6 for K = 4 and 5 clients.)
    """
    moved: list[int] = []
    if len(assignment) < k:
        return moved
    for model in range(k):
        counts = torch.bincount(assignment, minlength=k)
        if counts[model] > 0:
            continue
        donors = torch.nonzero(counts[assignment] >= 2).squeeze(1).tolist()
        pick = donors[int(rng.integers(0, len(donors)))]
        assignment[pick] = model
        moved.append(pick)
    return moved


def choose_k_authors(embedding: np.ndarray, k_max: int) -> tuple[int, dict[int, float]]:
    """The authors' rule for an unknown K (their `find_best_K_by_silhouette`, re-implemented from its description).

    Ward-linkage agglomerative clustering of the loss vectors as they are (square roots under SLV, not
    centred) for K = 2..min(P, k_max); when that upper end reaches the number of clients P, every vector
    is repeated 5 times first (so K = P is possible). The silhouette of each K is compared with the best
    so far (starting at -1): a K replaces it only if its score is more than 1.10 times the best (strictly),
    so ties and near-ties keep the smaller K. K = 1 is never chosen. Returns (K, scores); fewer than 2
    clients give K = 1 (the authors' code fails there).
    """
    from sklearn.cluster import AgglomerativeClustering

    n = len(embedding)
    upper = min(n, k_max)
    if upper < 2:
        return 1, {}
    points = np.repeat(embedding, 5, axis=0) if upper >= n else embedding
    scores: dict[int, float] = {}
    best_k, best = None, -1.0
    for k in range(2, upper + 1):
        labels = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(points)
        if len(set(labels)) < 2:
            continue
        scores[k] = float(silhouette_score(points, labels))
        if scores[k] > best * AUTHORS_K_MARGIN:
            best_k, best = k, scores[k]
    return (best_k if best_k is not None else 1), scores


class Clove(Algorithm):
    name = "clove"
    label = "CLoVE"
    summary = "Clusters clients by their vector of losses on all models; matches clusters to models."
    needs_models = True
    uses_init_mode = True
    has_loss_vectors = True
    Options = CloveOptions

    def setup(self, clients):
        self.models, extras = self.initial_models(self.num_models, clients)
        self.unchanged = torch.zeros(self.ctx.fed.num_clients, dtype=torch.int64)
        self.frozen = False
        self.centres: dict[int, np.ndarray] = {}  # model index -> cluster centre in embedding space
        return extras

    @property
    def unchanged_needed(self) -> int:
        """Unchanged transitions that make a client stable: n identical assignments are n - 1 transitions."""
        o = self.opts
        return o.stable_after - 1 if o.stable_after is not None else o.stable_rounds

    def _embed(self, losses: torch.Tensor) -> np.ndarray:
        values = losses.clamp(min=0).sqrt() if self.opts.sqrt_losses else losses
        return values.double().numpy()

    def _cluster(self, losses: torch.Tensor, round_index: int) -> tuple[torch.Tensor, dict]:
        """KMeans on the loss vectors, then clusters matched to models by minimum summed loss."""
        embedding = self._embed(losses)
        seed = derive_seed(self.cfg.seed, "clove-kmeans", round_index)
        info = {}
        if not self.opts.unknown_k:
            k = min(self.opts.k or self.models.shape[0], len(embedding))
        elif self.opts.k_rule == "authors":
            k, scores = choose_k_authors(embedding, self.models.shape[0])
            info["silhouette"] = {str(j): s for j, s in scores.items()}
        else:
            k, scores = choose_k(embedding, self.models.shape[0], seed, self.opts.min_silhouette,
                                 self.opts.silhouette_tolerance)
            info["silhouette"] = {str(j): s for j, s in scores.items()}
        if k <= 1:
            labels, centres = np.zeros(len(embedding), dtype=int), embedding.mean(0, keepdims=True)
        else:
            km = KMeans(k, n_init=10, random_state=seed % 2**31).fit(embedding)
            labels, centres = km.labels_, km.cluster_centers_
        clusters = int(labels.max()) + 1
        cost = np.zeros((clusters, self.models.shape[0]))
        np.add.at(cost, labels, embedding if self.opts.match_on == "embedding" else losses.double().numpy())
        rows, cols = linear_sum_assignment(cost)  # rectangular when fewer clusters than models
        to_model = dict(zip(rows.tolist(), cols.tolist()))
        self.centres = {to_model[j]: centres[j] for j in range(clusters)}
        info["k"] = clusters
        return torch.tensor([to_model[j] for j in labels], dtype=torch.int64), info

    def run_round(self, round_index, participants):
        phase, new, losses, extras = self._assign(round_index, participants)
        self._track_stability(round_index, participants, new, phase, extras)
        # A client that sent a loss vector already holds all K models: it is not sent its own again.
        self.models, train_loss = self.engine.train_and_aggregate(
            self.models, participants, self.assign[participants], round_index,
            weighting=self.opts.weighting)
        return RoundOutcome(phase, losses, train_loss, extras)

    def _assign(self, round_index: int, participants: torch.Tensor
                ) -> tuple[str, torch.Tensor, torch.Tensor | None, dict]:
        """(phase, new model per participant, loss matrix or None, extras) of this round."""
        if self.frozen:
            extras = {}
            unplaced = participants[self.assign[participants] < 0]
            if len(unplaced):
                # under partial participation a client may first take part after the freeze:
                # it is placed like a newcomer (nearest cluster centre of its loss vector)
                self.place_newcomers(unplaced, round_index)
                extras["placed_after_freeze"] = unplaced.tolist()
            return "stable", self.assign[participants], None, extras
        if round_index == 0 and self.opts.first_assignment == "random":
            k_hat = self.models.shape[0]
            new = torch.as_tensor(self.rng("first").integers(0, k_hat, len(participants)), dtype=torch.int64)
            extras = {}
            if self.opts.cover_models:
                moved = cover_every_model(new, k_hat, self.rng("first-cover"))
                if moved:
                    extras["first_assignment_moved"] = [int(participants[i]) for i in moved]
            return "init", new, None, extras
        losses = self.engine.loss_matrix(self.models, participants, uploads=True)  # the server clusters them
        new, extras = self._cluster(losses, round_index)
        return "clustering", new, losses, extras

    def _track_stability(self, round_index: int, participants: torch.Tensor, new: torch.Tensor, phase: str,
                         extras: dict) -> None:
        """Apply the assignment, count unchanged rounds, and freeze once enough participants are stable."""
        old = self.assign[participants]
        self.unchanged[participants] = torch.where(new == old, self.unchanged[participants] + 1, 0)
        self.assign[participants] = new
        stable = self.unchanged[participants] >= self.unchanged_needed
        extras["stable_share"] = float(stable.float().mean()) if len(participants) else 0.0
        if (self.opts.freeze and not self.frozen and phase == "clustering"
                and extras["stable_share"] >= self.opts.stable_share):
            self.frozen = True
            extras["frozen_after"] = round_index  # no loss vectors from the next round on

    def place_newcomers(self, clients, round_index):
        """Nearest cluster centre of the newcomer's loss vector (lowest loss before any clustering)."""
        losses = self.engine.loss_matrix(self.models, clients, uploads=True)  # the centres are on the server
        if self.centres:
            models = sorted(self.centres)
            centres = np.stack([self.centres[m] for m in models])
            dist = ((self._embed(losses)[:, None, :] - centres[None]) ** 2).sum(-1)
            self.assign[clients] = torch.tensor([models[j] for j in dist.argmin(1)], dtype=torch.int64)
        else:
            self.assign[clients] = torch.argmin(losses, dim=1)
        self.unchanged[clients] = 0
