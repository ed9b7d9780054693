"""IFCA's test machines: held-out clients per cluster that only test, never train.

IFCA's evaluation (Ghosh et al.'s code) scores the models on separate "test machines":
each belongs to a cluster, holds test data drawn through that cluster's transform
(its rotation, label swap, ...), and takes the model with the lowest loss on its own
test data. `build_test_machines` makes `test_machines_per_cluster` such machines per
cluster for a run's partition:

- the cluster transforms are the partition's own (`cluster_transforms` with the same
  config and seed), so machine k sees what cluster k's training clients see;
- each machine's labels follow its cluster's label weights (`cluster_weights`), with
  the run's test size per client;
- the images are drawn from the test pool on a stream of their own, disjoint across
  the machines while the pool has enough of a class (`draw_test`), from the whole pool
  in random order: never the first rows of the file, which IFCA's code, scaled down,
  takes for every cluster (docs/faithfulness.md explains what that does to its figure).

The test pool is separate from the training pool, so no test machine holds a sample
any client trains on, and the machines are not clients: training never sees them.
The machines may share test images with the training clients' own test splits (both
come from the test pool; on Fashion-MNIST at 100 clients x 100 test samples the
clients' splits are the whole pool).
"""
from __future__ import annotations

import numpy as np
import torch

from .data.base import REGRESSION
from .engine.federation import Federation
from .partition import ClientData, transforms
from .partition.config import pool_supply
from .partition.rounding import largest_remainder
from .partition.sampling import draw_test
from .partition.structures import cluster_transforms, cluster_weights

STREAM_TEST_MACHINES = 18  # the partition's streams are 11-17


def machines_per_cluster(config) -> int:
    """How many test machines each cluster gets: the setting, or the training clients per cluster when unset."""
    n = config.test_machines_per_cluster
    return config.clients_per_cluster if n is None else int(n)


def machine_counts(config, info, per_cluster: int) -> np.ndarray:
    """[clusters x per_cluster, classes] test labels per machine: its cluster's label weights, the run's test size."""
    weights = cluster_weights(config.partition, config.clusters, pool_supply(info))
    size = config.partition_config().test_size
    rows = [largest_remainder(weights[k], size) for k in range(config.clusters) for _ in range(per_cluster)]
    return np.stack(rows)


def build_test_machines(config, dataset, device: torch.device) -> Federation | None:
    """The run's test machines as a federation (empty training splits), machine i in cluster i // per_cluster;
    None when there are none (`test_machines_per_cluster=0`: the clients' own test splits stand in)."""
    per_cluster = machines_per_cluster(config)
    if per_cluster <= 0:
        return None
    info = dataset.info
    per_transform, truth = cluster_transforms(config.partition, config.clusters, info, config.seed)
    rows = machine_test_indices(config, dataset)
    empty_x = dataset.x_test[:0]
    empty_y = dataset.y_test[:0]
    machines = []
    for i, idx in enumerate(rows):
        cluster = i // per_cluster
        picked = torch.from_numpy(idx)
        # noise ids (linear mixtures) after every client's, so a machine never repeats a client's noise
        x, y = transforms.apply(per_transform[cluster], dataset.x_test[picked], dataset.y_test[picked], truth,
                                config.seed, config.num_clients + i, 1)
        machines.append(ClientData(empty_x, empty_y, x, y, cluster))
    return Federation.from_clients(machines, info.task, info.num_classes, device)


def machine_test_indices(config, dataset) -> list[np.ndarray]:
    """The test-pool rows of each test machine (what `build_test_machines` draws; for checks and tests)."""
    per_cluster = machines_per_cluster(config)
    if per_cluster <= 0:
        return []
    info = dataset.info
    labels = np.zeros(info.n_test, np.int64) if info.task == REGRESSION else dataset.y_test.numpy()
    rows, _ = draw_test(labels, machine_counts(config, info, per_cluster), config.seed, stream=STREAM_TEST_MACHINES)
    return rows
