"""k-FED (Dennis, Li, Smith, "Heterogeneity for the win: one-shot federated clustering", ICML 2021):
cluster the clients once by their data, then FedAvg inside each cluster.

One shot, before training:
1. every client runs k-means with k' = `local_k` clusters on its own inputs and
   sends the k' centres (and how many of its points each holds);
2. the server runs k-means with k = `--models` on all the clients' centres
   (scikit-learn, 10 initialisations);
3. a client joins the cluster that holds most of its points: each of its
   centres votes for the server cluster it fell into, weighted by its points
   (ties go to the lowest cluster index).
The paper's device-level condition is k' <= sqrt(k) (it assumes each device
holds few of the k clusters). Then each cluster
trains its model by FedAvg (the engine's train_and_aggregate), all models
starting from the run's model 0. A newcomer sends its centres once and joins
the cluster its centres vote for (nearest server centre each).

It sees the clients through their inputs only. Where the clusters differ by
their labels (concept shift: identical inputs, swapped labels) the inputs carry
no trace of the clusters and the assignment is chance (ARI near 0); where the
inputs differ (rotated images) it can find them. The clustering is never
revisited, so under distribution shift it keeps the set-up's groups.

Records (round 0): `local_centres` (each client's centres, flattened, one row
per client present at set-up), `centre_votes` (its points per cluster) and
`centre_clients` (which client each row is) — how k-FED sees the clients. Traffic: k' x (d + 1) floats up per client once,
then FedAvg's per round.

Default local_k = 1, measured with `python scripts/option_sweep.py --algorithm kfed --grid local_k=1,2,4 --partitions feature-skew,concept-shift,label-skew-3 --seeds 0,1,2 --rounds 30` (digits, 4 clusters x 5 clients, 60 samples, MLP; final accuracy %, mean over the seeds); final accuracy and ARI:

    local_k        1             2             4
    feature-skew   94.72, 1.00   87.00, 0.39   86.33, 0.39
    concept-shift  67.17, 0.02   66.67, -0.03  66.67, -0.05
    label-skew-3   93.89, 0.73   93.83, 0.01   94.11, 0.06

A digits client holds every class, so two or more local centres split it by
digit and the server's k-means then groups digits, not clients; with one
centre (the client's mean input) rotations separate completely.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.cluster import KMeans
from sklearn.metrics import pairwise_distances_argmin

from ..engine.seeding import derive_seed
from ..settings import Interval, setting
from .base import Algorithm, RoundOutcome, WeightingOptions


@dataclass(frozen=True)
class KFedOptions(WeightingOptions):
    local_k: int = setting(1, Interval(1), label="Local clusters (k')",
                           help="k-means clusters each client fits on its own inputs")
    record_centres_max: int = setting(200, Interval(0), label="Record centres up to",
                                      help="record the clients' local centres when at most this many clients send them")


def vote(labels: np.ndarray, sizes: np.ndarray, k: int) -> tuple[int, list[int]]:
    """(the cluster holding most of a client's points, its points per cluster); ties go to the lowest index."""
    votes = np.bincount(labels, weights=sizes, minlength=k)
    return int(np.argmax(votes)), [int(v) for v in votes]


class KFed(Algorithm):
    name = "kfed"
    label = "k-FED"
    summary = "One-shot: clients send k-means centres of their inputs; the server clusters them; FedAvg per cluster."
    needs_models = True
    Options = KFedOptions

    def setup(self, clients):
        k = self.num_models
        self.models = self.base_model().expand(k, -1).clone()
        local = self.engine.upload_local_centres(clients, self.opts.local_k, self.cfg.seed)
        centres = np.concatenate([c for c, _ in local])
        k = min(k, len(centres))
        server = KMeans(k, n_init=10, random_state=derive_seed(self.cfg.seed, "kfed-server") % 2**31).fit(centres)
        # only the server's centres are kept: what a checkpoint can hold, and all a newcomer's vote needs
        self.server_centres = server.cluster_centers_
        labels, start = server.labels_, 0
        votes = []
        for client, (c, sizes) in zip(clients.tolist(), local):
            cluster, counts = vote(labels[start : start + len(c)], sizes, self.num_models)
            self.assign[client] = cluster
            votes.append(counts)
            start += len(c)
        extras = {"centre_votes": votes, "centre_clients": clients.tolist()}
        if len(clients) <= self.opts.record_centres_max:
            extras["local_centres"] = [[round(float(v), 4) for v in c.reshape(-1)] for c, _ in local]
        return extras

    def place_newcomers(self, clients, round_index):
        for client, (c, sizes) in zip(clients.tolist(), self.engine.upload_local_centres(clients, self.opts.local_k,
                                                                                        self.cfg.seed)):
            nearest = pairwise_distances_argmin(c.astype(self.server_centres.dtype), self.server_centres)
            self.assign[client] = vote(nearest, sizes, self.num_models)[0]

    def run_round(self, round_index, participants):
        self.models, train_loss = self.engine.train_and_aggregate(
            self.models, participants, self.assign[participants], round_index,
            weighting=self.opts.weighting)
        return RoundOutcome("training", None, train_loss)
