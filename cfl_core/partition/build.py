"""Building a partition: who holds which samples, and materialising their tensors."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from ..data.base import REGRESSION, Dataset, DatasetInfo
from ..errors import ConfigError
from . import transforms
from .config import PartitionConfig, pool_supply
from .plan import test_counts, train_counts
from .sampling import draw_disjoint, draw_test, draw_with_replacement
from .structures import cluster_transforms, cluster_weights


@dataclass
class ClientSpec:
    id: int
    cluster: int
    train_idx: np.ndarray  # rows of the source's train pool
    test_idx: np.ndarray  # rows of the source's test pool
    transform: dict  # {} | {"rotation": deg} | {"label_map": [...]} | {"theta": k}
    label_counts: list[int] = dataclasses.field(default_factory=list)  # train labels as the client sees them


@dataclass
class ClientData:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    cluster: int


@dataclass
class Partition:
    config: PartitionConfig
    info: DatasetInfo
    clients: list[ClientSpec]
    # synthetic-linear: {"theta": one row per cluster, "noise_sigma", "min_separation"}; {} otherwise
    truth: dict
    test_disjoint: bool = True  # False: some test samples are shared between clients

    def materialize(self, dataset: Dataset) -> list[ClientData]:
        """Every client's tensors with its cluster's transform applied (train and test alike)."""
        if dataset.info.name != self.info.name or dataset.info.n_train != self.info.n_train:
            raise ConfigError("dataset", dataset.info.name, f"the data this partition was built on ({self.info.name})")
        out = []
        for spec in self.clients:
            splits = []
            for split, (x_pool, y_pool, idx) in enumerate([
                (dataset.x_train, dataset.y_train, spec.train_idx),
                (dataset.x_test, dataset.y_test, spec.test_idx),
            ]):
                rows = torch.from_numpy(idx)
                splits.append(transforms.apply(spec.transform, x_pool[rows], y_pool[rows],
                                               self.truth, self.config.seed, spec.id, split))
            (x_tr, y_tr), (x_te, y_te) = splits
            out.append(ClientData(x_tr, y_tr, x_te, y_te, spec.cluster))
        return out

    def to_json(self) -> dict:
        info = dataclasses.asdict(self.info)
        return {
            "config": dataclasses.asdict(self.config),
            "dataset": {k: list(v) if isinstance(v, tuple) else v for k, v in info.items()},
            "truth": self.truth,
            "test_disjoint": self.test_disjoint,
            "clients": [
                {
                    "id": c.id,
                    "cluster": c.cluster,
                    "n_train": int(len(c.train_idx)),
                    "n_test": int(len(c.test_idx)),
                    "label_counts": list(c.label_counts),
                    "transform": c.transform,
                }
                for c in self.clients
            ],
        }


def _seen_counts(counts: np.ndarray, transform: dict, info: DatasetInfo) -> list[int]:
    if info.task == REGRESSION:
        return []
    seen = np.zeros(len(counts), dtype=np.int64)
    label_map = transform.get("label_map", list(range(len(counts))))
    for c, n in enumerate(counts):
        seen[label_map[c]] += n
    return [int(v) for v in seen]


def build_partition(dataset: Dataset, config: PartitionConfig) -> Partition:
    """Place clusters x clients_per_cluster clients on the source's pools.

    Client i belongs to cluster i // clients_per_cluster. Training samples are
    disjoint across all clients (with `sample_with_replacement`, each client draws
    from the whole pool independently, so clients may share samples); test samples
    come from the separate test pool
    with each client's training label proportions. Same config -> same partition.
    """
    info = dataset.info
    config.validate(info)
    regression = info.task == REGRESSION
    weights = cluster_weights(config.partition, config.clusters, pool_supply(info))
    per_cluster, truth = cluster_transforms(config.partition, config.clusters, info, config.seed)
    train = train_counts(config, weights)
    test = test_counts(train, config.test_size)
    train_labels = np.zeros(info.n_train, np.int64) if regression else dataset.y_train.numpy()
    test_labels = np.zeros(info.n_test, np.int64) if regression else dataset.y_test.numpy()
    draw = draw_with_replacement if config.sample_with_replacement else draw_disjoint
    train_idx = draw(train_labels, train, config.seed)
    test_idx, disjoint = draw_test(test_labels, test, config.seed)
    clients = []
    for i in range(config.num_clients):
        cluster = i // config.clients_per_cluster
        transform = per_cluster[cluster]
        clients.append(ClientSpec(i, cluster, train_idx[i], test_idx[i], transform,
                                  _seen_counts(train[i], transform, info)))
    return Partition(config, info, clients, truth, disjoint)
