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
    stable_rounds: int = setting(3, Interval(1), label="Stable after (rounds)",
                                 help="a client is stable once its model has not changed for this many rounds")
    stable_share: float = setting(1.0, Interval(0, 1, low_open=True), label="Stable share", step=0.05,
                                  allowed_text="a share in (0, 1]",
                                  help="clustering stops once this share of the participants is stable")
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
        np.add.at(cost, labels, losses.double().numpy())
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
            return "init", new, None, {}
        losses = self.engine.loss_matrix(self.models, participants, uploads=True)  # the server clusters them
        new, extras = self._cluster(losses, round_index)
        return "clustering", new, losses, extras

    def _track_stability(self, round_index: int, participants: torch.Tensor, new: torch.Tensor, phase: str,
                         extras: dict) -> None:
        """Apply the assignment, count unchanged rounds, and freeze once enough participants are stable."""
        old = self.assign[participants]
        self.unchanged[participants] = torch.where(new == old, self.unchanged[participants] + 1, 0)
        self.assign[participants] = new
        stable = self.unchanged[participants] >= self.opts.stable_rounds
        extras["stable_share"] = float(stable.float().mean()) if len(participants) else 0.0
        if not self.frozen and phase == "clustering" and extras["stable_share"] >= self.opts.stable_share:
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
