"""The partition request and its up-front validation."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..data.base import REGRESSION, DatasetInfo
from ..data.registry import SOURCES
from ..errors import ConfigError
from .plan import fits, max_samples_per_client, train_counts
from .structures import PARTITIONS, check_structure, cluster_transforms, cluster_weights, label_supports

# Flower (flwr-datasets) names for the split inside a cluster.
WITHIN_SPLITS = ("iid", "dirichlet", "pathological")


@dataclass(frozen=True)
class PartitionConfig:
    dataset: str
    partition: str = "feature-skew"
    clusters: int = 4
    clients_per_cluster: int = 5
    samples_per_client: int = 60
    test_samples_per_client: int | None = None  # None: max(10, samples_per_client // 2)
    within: str = "iid"
    alpha: float = 0.5  # Dirichlet concentration (within="dirichlet")
    num_classes_per_partition: int = 2  # labels per client (within="pathological")
    quantity_skew: float = 0.0  # 0: equal sizes; > 0: power-law exponent, mean kept
    seed: int = 0

    @property
    def num_clients(self) -> int:
        return self.clusters * self.clients_per_cluster

    @property
    def test_size(self) -> int:
        if self.test_samples_per_client is not None:
            return self.test_samples_per_client
        return max(10, self.samples_per_client // 2)

    def validate(self, info: DatasetInfo) -> None:
        """ConfigError (naming parameter, value and what is allowed) for any request
        that cannot work on this source. Cheap: uses only the static facts in `info`."""
        _check_names(self, info)
        _check_numbers(self)
        check_structure(self.partition, self.clusters, info)
        _check_within(self, info)
        _check_capacity(self, info)
        cluster_transforms(self.partition, self.clusters, info, self.seed)  # may refuse K thetas


def pool_supply(info: DatasetInfo, split: str = "train") -> np.ndarray:
    """Samples per class in a pool; one pseudo-class for regression.
    Without class counts (a hand-made DatasetInfo) assume a balanced pool."""
    total = info.n_train if split == "train" else info.n_test
    if info.task == REGRESSION:
        return np.array([total], dtype=np.int64)
    counts = info.train_class_counts if split == "train" else info.test_class_counts
    if counts:
        return np.asarray(counts, dtype=np.int64)
    return np.full(info.num_classes, total // max(1, info.num_classes), dtype=np.int64)


def _check_names(cfg: PartitionConfig, info: DatasetInfo) -> None:
    if cfg.dataset not in SOURCES:
        raise ConfigError("dataset", cfg.dataset, "one of " + ", ".join(SOURCES))
    if info.name != cfg.dataset:
        raise ConfigError("dataset", cfg.dataset, f"the same source as the data given ({info.name})")
    if cfg.partition not in PARTITIONS:
        raise ConfigError("partition", cfg.partition, "one of " + ", ".join(PARTITIONS))
    if cfg.within not in WITHIN_SPLITS:
        raise ConfigError("within", cfg.within, "one of " + ", ".join(WITHIN_SPLITS))


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _check_numbers(cfg: PartitionConfig) -> None:
    for name in ("clusters", "clients_per_cluster", "samples_per_client", "num_classes_per_partition"):
        value = getattr(cfg, name)
        if not _is_int(value) or value < 1:
            raise ConfigError(name, value, "a whole number of at least 1")
    t = cfg.test_samples_per_client
    if t is not None and (not _is_int(t) or t < 1):
        raise ConfigError("test_samples_per_client", t, "a whole number of at least 1 (or unset)")
    if not _is_int(cfg.seed) or cfg.seed < 0:
        raise ConfigError("seed", cfg.seed, "a whole number of at least 0")
    if isinstance(cfg.alpha, bool) or not isinstance(cfg.alpha, (int, float)) or not (
        math.isfinite(cfg.alpha) and cfg.alpha > 0
    ):
        raise ConfigError("alpha", cfg.alpha, "a finite number greater than 0")
    q = cfg.quantity_skew
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not (math.isfinite(q) and q >= 0):
        raise ConfigError("quantity_skew", q, "a finite number of at least 0 (0 = equal client sizes)")


def _check_within(cfg: PartitionConfig, info: DatasetInfo) -> None:
    if info.task == REGRESSION and cfg.within != "iid":
        raise ConfigError("within", cfg.within, f"iid for the regression source {info.name} (it has no labels)")
    if cfg.within == "pathological":
        fewest = min(len(s) for s in label_supports(cfg.partition, cfg.clusters, info.num_classes))
        if cfg.num_classes_per_partition > fewest:
            raise ConfigError("num_classes_per_partition", cfg.num_classes_per_partition,
                              f"1..{fewest}: each cluster of {cfg.partition} holds {fewest} labels or more")


def _check_capacity(cfg: PartitionConfig, info: DatasetInfo) -> None:
    supply = pool_supply(info)
    if cfg.num_clients > supply.sum():
        # Not even one sample each: say so without planning millions of clients.
        raise ConfigError("clients_per_cluster", cfg.clients_per_cluster,
                          f"at most {int(supply.sum()) // cfg.clusters} with {cfg.clusters} clusters: "
                          f"{info.name}'s train pool has {int(supply.sum())} samples")
    weights = cluster_weights(cfg.partition, cfg.clusters, supply)
    counts = train_counts(cfg, weights)
    if not fits(counts, supply):
        best = max_samples_per_client(cfg, weights, supply)
        short = int(np.argmax(counts.sum(0) - supply))
        where = f"{cfg.partition} with {cfg.clusters} clusters x {cfg.clients_per_cluster} clients on {info.name}"
        pool = f"the train pool has {info.n_train} samples" + (
            "" if info.task == REGRESSION else f"; class {short} runs out first ({int(supply[short])} samples)")
        if best == 0:
            allowed = f"no value works for {where} ({pool}); use fewer clusters or clients_per_cluster"
        else:
            allowed = f"at most {best} for {where} without drawing a sample twice ({pool})"
        raise ConfigError("samples_per_client", cfg.samples_per_client, allowed)
    # A test set larger than the whole test pool could only be filled with repeats.
    if cfg.test_size > info.n_test:
        default = "" if cfg.test_samples_per_client is not None else " (the default, max(10, samples_per_client // 2))"
        raise ConfigError("test_samples_per_client", cfg.test_size,
                          f"at most {info.n_test}{default}: the size of {info.name}'s test pool")
