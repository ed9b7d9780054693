"""PACFL (Vahidian, Morafah, Wang, Kungurtsev, Chen, Shah, Lin, "Efficient distribution similarity
identification in clustered federated learning via principal angles between client data subspaces",
AAAI 2023): cluster the clients once by the angles between their data subspaces, then FedAvg per cluster.

One shot, before training:
1. every client takes the truncated SVD of its data matrix (features x
   samples, not centred) and sends the top `p` left singular vectors; with
   `per_class` (the authors' code) one SVD per label it holds, the vectors
   stacked;
2. the server fills the proximity matrix A[i, j] with the angle between client
   i's and j's subspaces, in degrees: `measure=principal`, the smallest
   principal angle (SciPy's subspace_angles; the paper's definition), or
   `measure=basis-pairs`, the smallest angle between any basis vector of i and
   any of j, arccos of their signed dot product (the authors' code; never
   below the principal angle);
3. agglomerative (hierarchical) clustering of A with `linkage` (SciPy): with
   `threshold` set, merging stops when the closest clusters are more than
   `threshold` degrees apart, so PACFL chooses the number of clusters itself,
   as in the paper (`--models` is then ignored); otherwise it stops at
   `--models` clusters. The authors' "average" linkage replaces the merged
   row by the plain mean of the two rows: that is SciPy's `weighted` (WPGMA);
   SciPy's `average` is the size-weighted UPGMA. The paper's settings: p = 3
   (`n_basis`), average linkage, thresholds tuned per data set.
Each cluster then trains its model by FedAvg, every model from the run's model
0. A newcomer sends its subspace once and joins the cluster whose members'
subspaces are at the smallest mean angle from it.

It sees the clients through their inputs only: under concept shift (the same
inputs, swapped labels) every client spans the same subspace and the clustering
is chance (ARI near 0); rotated images (feature skew) span rotated subspaces and
separate. Never revisited under distribution shift.

Records (round 0): `angles` (the proximity matrix of the clients present at
set-up, degrees), `angle_clients` (which client each row is) and
`clusters_found`. Traffic: p x d floats (x labels held, per class) up per client once,
then FedAvg's per round.

Defaults p = 3 (the paper's), measure basis-pairs, per_class false and linkage
average, measured with `python scripts/option_sweep.py --algorithm pacfl --grid
measure=principal,basis-pairs --grid per_class=true,false --partitions
feature-skew,concept-shift,label-skew-3 --seeds 0,1,2 --rounds 30` (digits, 4
clusters x 5 clients, 60 samples; final ARI, mean over the seeds):

    measure / per_class  principal, true  principal, false  basis-pairs, true  basis-pairs, false
    feature-skew         0.46             1.00              1.00               1.00
    concept-shift        0.07             -0.02             0.00               0.03
    label-skew-3         0.01             0.28              0.12               0.51

(one SVD per label stacks 30 directions of a 64-dimensional space: any two such
subspaces nearly meet, so their smallest principal angle says little), then over
p in {1, 3, 5} and linkage (basis-pairs, per_class false): p changes nothing (the
first singular vectors decide the smallest angle) and on label-skew-3 average
linkage gives ARI 0.63, weighted 0.51, complete 0.68 (within the seeds' spread;
the paper's named linkage is kept). Concept shift stays at chance whatever the
settings: that is the point.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

from ..engine.summaries import ANGLE_MEASURES, angle_matrix
from ..errors import ConfigError
from ..settings import Choice, Interval, setting
from .base import Algorithm, RoundOutcome, WeightingOptions

LINKAGES = ("weighted", "average", "complete", "single")


@dataclass(frozen=True)
class PACFLOptions(WeightingOptions):
    p: int = setting(3, Interval(1), label="Singular vectors (p)", help="top left singular vectors each client sends")
    per_class: bool = setting(False, label="One SVD per label", help="an SVD per label the client holds (authors' code)")
    measure: str = setting("basis-pairs", Choice(tuple(ANGLE_MEASURES)), label="Angle",
                           help="principal: smallest principal angle; basis-pairs: the authors' code's measure")
    linkage: str = setting("average", Choice(LINKAGES), label="Linkage",
                           help="hierarchical clustering linkage (weighted = the authors' 'average')")
    threshold: float | None = setting(None, Interval(0, low_open=True), label="Merge threshold (degrees)",
                                      none_means="stop at --models clusters", step=0.5,
                                      help="stop merging when clusters are this far apart (PACFL chooses K)")
    record_angles_max: int = setting(200, Interval(0), label="Record angles up to",
                                     help="record the [clients, clients] angle matrix up to this many clients")


def cluster_angles(angles: np.ndarray, method: str, threshold: float | None, k: int) -> np.ndarray:
    """Cluster labels 0.. (in order of first appearance) of hierarchical clustering of an angle matrix."""
    if len(angles) == 1:
        return np.zeros(1, dtype=int)
    tree = linkage(squareform(angles, checks=False), method=method)
    labels = fcluster(tree, t=threshold, criterion="distance") if threshold is not None else fcluster(
        tree, t=k, criterion="maxclust")
    _, first = np.unique(labels, return_index=True)
    order = {int(labels[i]): rank for rank, i in enumerate(sorted(first))}
    return np.array([order[int(v)] for v in labels])


class PACFL(Algorithm):
    name = "pacfl"
    label = "PACFL"
    summary = "One-shot: clients send top singular vectors of their data; principal angles; hierarchical clusters."
    needs_models = True
    Options = PACFLOptions

    @classmethod
    def validate_config(cls, cfg) -> None:
        opts = cls.parse_options(cfg.options)
        if cfg.models is None and opts.threshold is None:
            raise ConfigError("models", None, "a number of clusters (or options.threshold, to let PACFL choose)")
        opts.check(cfg)

    def setup(self, clients):
        o = self.opts
        self.subspaces = dict(zip(clients.tolist(), self.engine.upload_subspaces(clients, o.p, o.per_class)))
        angles = angle_matrix(list(self.subspaces.values()), o.measure)
        labels = cluster_angles(angles, o.linkage, o.threshold, self.num_models)
        count = int(labels.max()) + 1
        self.models = self.base_model().expand(count, -1).clone()
        self.assign[clients] = torch.as_tensor(labels, dtype=self.assign.dtype)
        extras = {"clusters_found": count, "angle_clients": clients.tolist()}
        if len(clients) <= o.record_angles_max:
            extras["angles"] = [[round(float(v), 3) for v in row] for row in angles]
        return extras

    def place_newcomers(self, clients, round_index):
        o = self.opts
        placed = [c for c in self.subspaces]
        members = np.array([int(self.assign[c]) for c in placed])
        fn = ANGLE_MEASURES[o.measure]
        for client, u in zip(clients.tolist(), self.engine.upload_subspaces(clients, o.p, o.per_class)):
            to_placed = np.array([fn(u, self.subspaces[c]) for c in placed])
            means = [to_placed[members == k].mean() if (members == k).any() else np.inf
                     for k in range(self.models.shape[0])]
            self.assign[client] = int(np.argmin(means))
        # newcomers are not added to the reference set: the clustering is the set-up's

    def run_round(self, round_index, participants):
        self.models, train_loss = self.engine.train_and_aggregate(
            self.models, participants, self.assign[participants], round_index,
            weighting=self.opts.weighting)
        return RoundOutcome("training", None, train_loss)
