"""CFL-GP (Kim, Kim & de Veciana, "Clustered federated learning via gradient-based partitioning", ICML 2024):
clusters by the updates clients compute on several models, accumulated over rounds.

K = `--models` models; every client starts in cluster 0. Every `period` rounds, until round `stop_after`,
is a clustering round. In the c-th clustering round (c = 0, 1, ...) the criterion model is m = c mod K: each
participant receives model m, trains it locally and sends the update (trained - model m); its column of
block m of the gradient profile matrix G (K blocks of D rows, one column per client) becomes the running
mean of its updates on model m so far. The server then takes the top K right singular vectors of G (over
the clients with a profile) to place each client in K dimensions, groups them by KMeans (K clusters), and
renumbers the groups to agree as much as possible with the previous clusters (minimum-cost matching,
scipy's linear_sum_assignment on the overlap; the authors' code tries every permutation). Clients without a
profile yet keep their cluster. Every round, after any clustering, each participant trains its cluster's
model and each model averages its clients (FedAvg, `weighting`). Updates on different models describe a
client from several points of view: clients of one distribution pull every model the same way, so the
columns of G separate by cluster after a few rounds even when no model fits anyone yet.

The right singular vectors come from the clients' Gram matrix G^T G (N x N; its eigenvectors scaled by the
singular values are the same coordinates up to signs, which KMeans ignores), so no [K D, N] decomposition
is needed. A newcomer keeps cluster 0 until its first clustering round (the paper starts everyone there).
Recorded: `profile_coordinates` (each client's K coordinates, when clustered) and `criterion`.

Where the authors' code (Heasung-Kim/clustered-federated-learning-via-gradient-based-partitioning) differs:
its criterion index is set to 0 and never advanced, so only block 0 of G is ever filled, and each client's
profile update is computed on its own cluster's model rather than the criterion model (the loop over the
queried models never uses its index): its G holds each client's updates on its own model. Its running mean
weight is 1 / (floor((t + 1) / (K period)) + 1) for round t, the same for every client (here each client's
own count of updates on that model, which differs only under partial participation). Its default
`protocol=gradient_averaging` sends one minibatch gradient instead of a trained update; CFL Lab's
`--aggregation gradient` is the counterpart for the models' training, while the profile uses updates.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans

from ..engine.seeding import derive_seed
from ..settings import Interval, setting
from .base import Algorithm, InitOptions, RoundOutcome


@dataclass(frozen=True)
class CFLGPOptions(InitOptions):
    period: int = setting(2, Interval(1), label="Clustering period (rounds)",
                          help="a clustering round every this many rounds (the authors' default 2)")
    stop_after: int | None = setting(10, Interval(1), label="Stop clustering at round", none_means="never",
                                     help="no clustering from this round on (the authors' default 10)")


def spectral_coordinates(profile: torch.Tensor, k: int) -> np.ndarray:
    """Each column of `profile` [rows, N] in the top-k right singular directions, scaled by the singular
    values: the columns of P_k^T G, up to a sign per coordinate, from the Gram matrix."""
    g = profile.double()
    gram = (g.T @ g).cpu().numpy()
    values, vectors = np.linalg.eigh(gram)
    top = np.argsort(values)[::-1][:k]
    return vectors[:, top] * np.sqrt(np.clip(values[top], 0, None))[None, :]


def match_to_previous(labels: np.ndarray, previous: np.ndarray, k: int) -> np.ndarray:
    """Renumber `labels` (0..k-1) so that as many clients as possible keep their `previous` cluster."""
    overlap = np.zeros((k, k))
    np.add.at(overlap, (labels, np.clip(previous, 0, k - 1)), 1)
    rows, cols = linear_sum_assignment(-overlap)
    mapping = dict(zip(rows.tolist(), cols.tolist()))
    return np.array([mapping[int(v)] for v in labels], dtype=np.int64)


class CFLGP(Algorithm):
    name = "cflgp"
    label = "CFL-GP"
    summary = "Clusters clients by their accumulated updates on every model (spectral partition of a profile)."
    needs_models = True
    uses_init_mode = True
    Options = CFLGPOptions

    def setup(self, clients):
        fed = self.ctx.fed
        self.models, extras = self.initial_models(self.num_models, clients)
        k, d = self.models.shape
        self.assign[clients] = 0
        self.profile = torch.zeros(k, d, fed.num_clients)  # G: block m, parameter, client
        self.counts = torch.zeros(k, fed.num_clients, dtype=torch.int64)  # updates on model m per client
        self.clustering_rounds = 0
        return extras

    def place_newcomers(self, clients, round_index):
        self.assign[clients] = 0

    def run_round(self, round_index, participants):
        extras: dict = {}
        phase = "training"
        stop = self.opts.stop_after
        if round_index % self.opts.period == 0 and (stop is None or round_index < stop):
            self._cluster(round_index, participants, extras)
            phase = "clustering"
        self.models, train_loss = self.engine.train_and_aggregate(
            self.models, participants, self.assign[participants], round_index, weighting=self.opts.weighting)
        return RoundOutcome(phase, None, train_loss, extras)

    def _cluster(self, round_index: int, participants: torch.Tensor, extras: dict) -> None:
        k = self.models.shape[0]
        m = self.clustering_rounds % k
        self.clustering_rounds += 1
        device = self.ctx.fed.device
        self.models = self.models.to(device)
        owners = torch.full((len(participants),), m, dtype=torch.int64)
        trained, _ = self.engine.federated_train(self.models, participants, owners, round_index,
                                                 stream=self.stream("criterion", round_index))
        update = (trained - self.models[m]).cpu()  # [P, D]
        self.counts[m, participants] += 1
        share = (1.0 / self.counts[m, participants].float())[None, :]
        self.profile[m][:, participants] = (1 - share) * self.profile[m][:, participants] + share * update.T
        seen = torch.nonzero(self.counts.sum(0) > 0).squeeze(1)
        extras["criterion"] = m
        if len(seen) < k:
            return
        coords = spectral_coordinates(self.profile[:, :, seen].reshape(-1, len(seen)), k)
        seed = derive_seed(self.cfg.seed, "cflgp-kmeans", round_index) % 2**31
        labels = KMeans(k, n_init=10, random_state=seed).fit_predict(coords)
        labels = match_to_previous(labels, self.assign[seen].numpy(), k)
        self.assign[seen] = torch.as_tensor(labels, dtype=torch.int64)
        if len(seen) <= 200:
            coordinates = [None] * self.ctx.fed.num_clients
            for c, row in zip(seen.tolist(), coords):
                coordinates[c] = [round(float(v), 5) for v in row]
            extras["profile_coordinates"] = coordinates
