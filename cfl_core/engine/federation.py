"""Every client's data as padded tensors on one device.

`x_train [M, n_max, ...]`, `y_train [M, n_max]` with `n_train [M]` valid rows per
client (the rest is padding that never contributes to a loss, a gradient or a
count); the same for the test split. Batched training and evaluation index into
these tensors directly, so no per-client Python objects are touched per step.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ConfigError


def resolve_device(name: str) -> torch.device:
    """`auto` = CUDA when present, else CPU; `cuda` without a GPU is refused up front."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("device", name, "auto or cpu: no CUDA device is visible to PyTorch here")
        return torch.device("cuda")
    raise ConfigError("device", name, "auto, cpu or cuda")


def _pad(tensors: list[torch.Tensor], dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    counts = torch.tensor([len(t) for t in tensors], dtype=torch.int64)
    n_max = max(1, int(counts.max())) if tensors else 1
    shape = tensors[0].shape[1:] if tensors else ()
    out = torch.zeros((len(tensors), n_max, *shape), dtype=dtype)
    for i, t in enumerate(tensors):
        out[i, : len(t)] = t.to(dtype)
    return out, counts


@dataclass
class Federation:
    x_train: torch.Tensor
    y_train: torch.Tensor
    n_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_test: torch.Tensor
    clusters: torch.Tensor  # true cluster id per client (CPU, int64)
    device: torch.device
    task: str
    num_classes: int

    @classmethod
    def from_clients(cls, clients, task: str, num_classes: int, device: torch.device) -> "Federation":
        """Build from a partition's materialised clients (objects with x/y train/test and cluster)."""
        if not clients:
            raise ConfigError("clients", 0, "at least one client")
        label_dtype = torch.int64 if task == "classification" else torch.float32
        x_train, n_train = _pad([c.x_train for c in clients], torch.float32)
        y_train, _ = _pad([c.y_train for c in clients], label_dtype)
        x_test, n_test = _pad([c.x_test for c in clients], torch.float32)
        y_test, _ = _pad([c.y_test for c in clients], label_dtype)
        clusters = torch.tensor([c.cluster for c in clients], dtype=torch.int64)
        return cls(
            x_train.to(device), y_train.to(device), n_train.to(device),
            x_test.to(device), y_test.to(device), n_test.to(device),
            clusters, device, task, num_classes,
        )

    @property
    def num_clients(self) -> int:
        return int(self.x_train.shape[0])

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[2:])

    def train_mask(self) -> torch.Tensor:
        return torch.arange(self.x_train.shape[1], device=self.device)[None, :] < self.n_train[:, None]

    def test_mask(self) -> torch.Tensor:
        return torch.arange(self.x_test.shape[1], device=self.device)[None, :] < self.n_test[:, None]

    def label_counts(self, clients: torch.Tensor | None = None) -> torch.Tensor:
        """Training label histogram per client `[M, classes]` (classification only)."""
        ids = torch.arange(self.num_clients, device=self.device) if clients is None else clients.to(self.device)
        y = self.y_train[ids]
        mask = self.train_mask()[ids]
        counts = torch.zeros(len(ids), self.num_classes, device=self.device)
        counts.scatter_add_(1, y.clamp(min=0), mask.float())
        return counts.cpu()
