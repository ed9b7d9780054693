"""The partition request and its up-front validation."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..data.base import REGRESSION, DatasetInfo
from ..data.registry import SOURCES
from ..errors import ConfigError
from .natural import check_natural
from .plan import fits, max_samples_per_client, train_counts
from ..settings import Choice, Interval, check_values, setting
from .structures import PARTITIONS, check_structure, cluster_transforms, cluster_weights, label_supports

# Flower (flwr-datasets) names for the split inside a cluster; `natural`: one client per natural client of the
# source (FEMNIST's writers, see natural.py).
WITHIN_SPLITS = ("iid", "dirichlet", "pathological", "natural")
# Caps: far above any federation this lab builds, so a typo is refused naming its field (not a later one).
MAX_CLUSTERS = 1_000
MAX_CLIENTS_PER_CLUSTER = 100_000
MAX_SAMPLES = 1_000_000
MAX_SEED = 2**32 - 1


def _source_names():
    return tuple(SOURCES)


def _partition_names():
    return tuple(PARTITIONS)


@dataclass(frozen=True)
class PartitionConfig:
    """Which clients exist: every field here defines the clients (ExperimentConfig shares these declarations)."""

    dataset: str = setting("digits", Choice(_source_names), label="Data set",
                           help="data source (see `python -m cfl_core datasets`)", group="data")
    partition: str = setting("feature-skew", Choice(_partition_names), label="Cluster structure",
                             help="what makes the true clusters differ (CLoVE's structures)", group="data")
    clusters: int = setting(4, Interval(1, MAX_CLUSTERS), label="True clusters",
                            help="how many groups of clients share a distribution", group="data")
    clients_per_cluster: int = setting(5, Interval(1, MAX_CLIENTS_PER_CLUSTER), label="Clients per cluster",
                                       help="clients in each true cluster", group="data")
    samples_per_client: int = setting(60, Interval(1, MAX_SAMPLES), label="Samples per client",
                                      help="training samples of each client", group="data")
    test_samples_per_client: int | None = setting(
        None, Interval(1, MAX_SAMPLES), label="Test samples per client", group="data", advanced=True,
        none_means="half the training samples, at least 10", help="test samples of each client")
    within: str = setting("iid", Choice(WITHIN_SPLITS), label="Split inside a cluster", group="data",
                          advanced=True, help="flwr-datasets names: iid, dirichlet (alpha), pathological; "
                                              "natural: one client per writer (femnist)")
    alpha: float = setting(0.5, Interval(0, low_open=True), label="Dirichlet alpha", group="data", advanced=True,
                           step=0.1, help="Dirichlet concentration for within=dirichlet; smaller = more uneven labels")
    num_classes_per_partition: int = setting(2, Interval(1, MAX_CLUSTERS), label="Labels per client (pathological)",
                                             group="data", advanced=True,
                                             help="labels per client for within=pathological")
    quantity_skew: float = setting(0.0, Interval(0, 10), label="Quantity skew", group="data", advanced=True, step=0.1,
                                   help="0 = equal client sizes; > 0 = power-law exponent of client sizes")
    sample_with_replacement: bool = setting(
        False, label="Samples may repeat", group="data", advanced=True,
        help="draw each client's samples from the whole pool independently of the other clients, so "
             "clients may share samples (more clients x samples than the pool holds); off = disjoint samples")
    seed: int = setting(0, Interval(0, MAX_SEED), label="Seed", group="training",
                        help="random seed: same seed = same data, same initial models, same run")

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
        check_values(self)
        if info.name != self.dataset:
            raise ConfigError("dataset", self.dataset, f"the same source as the data given ({info.name})")
        check_structure(self.partition, self.clusters, info)
        if self.within == "natural":
            check_natural(self, info)  # the writers' own samples: no pool plan to check
        else:
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
    if cfg.sample_with_replacement:
        _check_replacement_supply(cfg, info, supply)
        return
    if cfg.num_clients > supply.sum():
        # Not even one sample each: say so without planning millions of clients.
        raise ConfigError("clients_per_cluster", cfg.clients_per_cluster,
                          f"at most {int(supply.sum()) // cfg.clusters} with {cfg.clusters} clusters: "
                          f"{info.name}'s train pool has {int(supply.sum())} samples; "
                          "or set sample_with_replacement to let clients share samples")
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
        allowed += "; or set sample_with_replacement to let clients share samples"
        raise ConfigError("samples_per_client", cfg.samples_per_client, allowed)
    # A test set larger than the whole test pool could only be filled with repeats.
    if cfg.test_size > info.n_test:
        default = "" if cfg.test_samples_per_client is not None else " (the default, max(10, samples_per_client // 2))"
        raise ConfigError("test_samples_per_client", cfg.test_size,
                          f"at most {info.n_test}{default}: the size of {info.name}'s test pool")


def _check_replacement_supply(cfg: PartitionConfig, info: DatasetInfo, supply: np.ndarray) -> None:
    """With replacement any number of clients and samples can be drawn, as long as every label the
    plan asks for is in the train pool at least once."""
    weights = cluster_weights(cfg.partition, cfg.clusters, supply)
    empty = np.flatnonzero((train_counts(cfg, weights).sum(0) > 0) & (supply == 0))
    if len(empty):
        raise ConfigError("sample_with_replacement", cfg.sample_with_replacement,
                          f"false here: {info.name}'s train pool has no sample of class {int(empty[0])}, "
                          f"which {cfg.partition} asks for, so repeats cannot fill it")
