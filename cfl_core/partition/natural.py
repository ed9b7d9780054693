"""A natural federation: one client per natural client of the source (FEMNIST: one per writer).

`within=natural` replaces the split inside a cluster: instead of dealing a pool
out, client i IS a writer, with that writer's own training and test samples
(at most `samples_per_client` and the test size of them, drawn at random when a
writer has more). Writers with at least 2 training samples and 1 test sample
are eligible; `clusters x clients_per_cluster` of them are drawn at random
(seeded), and client i belongs to cluster i // clients_per_cluster.

A cluster structure may be imposed on top, so that ARI has a truth:
`feature-skew` rotates the images of cluster k, `concept-shift` swaps its labels
(the usual transforms). With `iid` nothing is imposed: the clients differ only
as their writers do, there are no true clusters, and ARI is recorded as not
applicable. Label skews would have to drop a writer's samples and are refused,
and so is `quantity_skew` (writers have their own sizes).
"""
from __future__ import annotations

import numpy as np

from ..data.base import Dataset, DatasetInfo
from ..errors import ConfigError

STREAM_NATURAL = 17
STRUCTURES = ("iid", "feature-skew", "concept-shift")  # the structures that can be imposed on natural clients
MIN_TRAIN, MIN_TEST = 2, 1


def check_natural(cfg, info: DatasetInfo) -> None:
    """ConfigError for a natural split this source or structure cannot give (static facts only)."""
    if not info.natural_clients:
        raise ConfigError("within", cfg.within, "iid, dirichlet or pathological: "
                                               f"{info.name} has no natural clients (femnist has: one per writer)")
    if cfg.partition not in STRUCTURES:
        raise ConfigError("partition", cfg.partition,
                          f"one of {', '.join(STRUCTURES)} with within=natural: natural clients keep their own labels")
    if cfg.quantity_skew:
        raise ConfigError("quantity_skew", cfg.quantity_skew, "0 with within=natural: writers have their own sizes")
    if cfg.num_clients > info.natural_clients:
        raise ConfigError("clients_per_cluster", cfg.clients_per_cluster,
                          f"at most {info.natural_clients // cfg.clusters} with {cfg.clusters} clusters: "
                          f"{info.name} has {info.natural_clients} natural clients")


def eligible(dataset: Dataset) -> np.ndarray:
    """Natural client ids with enough samples, in increasing order."""
    train = np.bincount(dataset.train_owner.numpy(), minlength=dataset.info.natural_clients)
    test = np.bincount(dataset.test_owner.numpy(), minlength=dataset.info.natural_clients)
    return np.flatnonzero((train >= MIN_TRAIN) & (test >= MIN_TEST))


def natural_indices(dataset: Dataset, cfg) -> tuple[list[int], list[np.ndarray], list[np.ndarray]]:
    """(writer of each client, its train rows, its test rows), every draw seeded by the config's seed."""
    pool = eligible(dataset)
    if cfg.num_clients > len(pool):
        raise ConfigError("clients_per_cluster", cfg.clients_per_cluster,
                          f"at most {len(pool) // cfg.clusters} with {cfg.clusters} clusters: the {dataset.info.name} "
                          f"files here hold {len(pool)} writers with >= {MIN_TRAIN} training and >= {MIN_TEST} test "
                          "samples")
    rng = np.random.default_rng([cfg.seed, STREAM_NATURAL])
    writers = rng.permutation(pool)[: cfg.num_clients]
    train_owner, test_owner = dataset.train_owner.numpy(), dataset.test_owner.numpy()
    train_idx, test_idx = [], []
    for w in writers:
        rows = np.flatnonzero(train_owner == w)
        train_idx.append(np.sort(rng.permutation(rows)[: cfg.samples_per_client]))
        rows = np.flatnonzero(test_owner == w)
        test_idx.append(np.sort(rng.permutation(rows)[: cfg.test_size]))
    return [int(w) for w in writers], train_idx, test_idx
