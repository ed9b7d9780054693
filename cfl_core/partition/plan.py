"""How many samples of each label every client gets, before any index is drawn.

The plan is a pure function of the config and the pool's class counts, so
validation can check it against the pools (and compute the largest feasible
samples_per_client) without loading any data.
"""
from __future__ import annotations

import numpy as np

from .rounding import fit_margins, largest_remainder, round_to_margins

STREAM_SIZES = 12
STREAM_WITHIN = 13
DIRICHLET_FLOOR = 1e-12  # keeps every supported label reachable when a draw underflows to 0


def client_sizes(n_clients: int, mean: int, exponent: float, rng: np.random.Generator) -> np.ndarray:
    """Equal sizes, or power-law sizes (rank^-exponent, shuffled) with the same
    total, so the mean stays `mean`; every client keeps at least one sample."""
    if exponent == 0 or n_clients == 1:
        return np.full(n_clients, mean, dtype=np.int64)
    shares = rng.permutation(np.arange(1, n_clients + 1, dtype=np.float64) ** -exponent)
    return largest_remainder(shares, n_clients * mean - n_clients) + 1


def _pathological_shape(n: int, per_client: int, weights_k: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    """Each client holds `per_client` labels (flwr-datasets' PathologicalPartitioner)."""
    support = np.flatnonzero(weights_k > 0)
    shape = np.zeros((n, len(weights_k)))
    # A dominant label (label-skew-4's 2/3 class) is held by every client, or the
    # cluster could not keep its share; the other labels are dealt round-robin so
    # each is held about equally often.
    dominant = support[weights_k[support] >= 0.5]
    order = rng.permutation(np.setdiff1d(support, dominant))
    slots = per_client - len(dominant)
    for j in range(n):
        shape[j, dominant] = 1.0
        if slots > 0 and len(order):
            shape[j, order[(j * slots + np.arange(slots)) % len(order)]] = 1.0
    # Labels no client holds drop out; their share goes to the other held labels,
    # so a dominant label keeps its share.
    effective = np.where(shape.sum(0) > 0, weights_k, 0.0)
    others = np.ones(len(weights_k), dtype=bool)
    others[dominant] = False
    if effective[others].sum() > 0:
        effective[others] *= weights_k[others].sum() / effective[others].sum()
    return shape, effective


def _within_shape(config, weights_k: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(label preferences [clients, classes], the cluster's label weights restricted
    to labels some client holds)."""
    n = config.clients_per_cluster
    if config.within == "pathological":
        return _pathological_shape(n, config.num_classes_per_partition, weights_k, rng)
    if config.within == "dirichlet":
        support = np.flatnonzero(weights_k > 0)
        shape = np.zeros((n, len(weights_k)))
        shape[:, support] = rng.dirichlet(np.full(len(support), config.alpha), size=n) + DIRICHLET_FLOOR
        return shape, weights_k
    return np.tile(weights_k, (n, 1)), weights_k  # iid: every client shares the cluster's distribution


def train_counts(config, weights: np.ndarray, samples_per_client: int | None = None) -> np.ndarray:
    """[clients, classes] training samples per client and label, in client-id order."""
    s = config.samples_per_client if samples_per_client is None else samples_per_client
    n = config.clients_per_cluster
    size_rng = np.random.default_rng([config.seed, STREAM_SIZES])
    within_rng = np.random.default_rng([config.seed, STREAM_WITHIN])
    blocks = []
    for k in range(config.clusters):
        sizes = client_sizes(n, s, config.quantity_skew, size_rng)
        shape, effective = _within_shape(config, weights[k], within_rng)
        budget = largest_remainder(effective, n * s)  # the cluster's total per label
        fitted = fit_margins(shape, sizes, budget)
        blocks.append(round_to_margins(fitted, sizes, budget, shape > 0))
    return np.concatenate(blocks)


def test_counts(train: np.ndarray, test_size: int) -> np.ndarray:
    """Each client's test labels in the proportions of its training labels."""
    return np.stack([largest_remainder(row, test_size) for row in train])


def fits(counts: np.ndarray, supply: np.ndarray) -> bool:
    return bool((counts.sum(0) <= supply).all())


def max_samples_per_client(config, weights: np.ndarray, supply: np.ndarray) -> int:
    """The largest samples_per_client whose plan the pool can serve without replacement."""
    lo, hi = 0, int(supply.sum()) // (config.clusters * config.clients_per_cluster)
    while lo < hi:  # demand grows with the size, so bisect
        mid = (lo + hi + 1) // 2
        if fits(train_counts(config, weights, mid), supply):
            lo = mid
        else:
            hi = mid - 1
    return lo
