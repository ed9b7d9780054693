"""The uniform description every data source loads into."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

CLASSIFICATION = "classification"
REGRESSION = "regression"


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    task: str  # CLASSIFICATION or REGRESSION
    input_shape: tuple[int, ...]  # (C, H, W) for images, (d,) for vectors
    num_classes: int  # 0 for regression
    n_train: int
    n_test: int
    # Samples per class in each pool (empty for regression or when unknown).
    # They let a partition check what the pools can give before loading anything.
    train_class_counts: tuple[int, ...] = ()
    test_class_counts: tuple[int, ...] = ()

    @property
    def is_image(self) -> bool:
        return len(self.input_shape) == 3


@dataclass
class Dataset:
    """Train and test pools as CPU tensors.

    x: float32 [N, *input_shape]; images scaled to [0, 1].
    y: int64 class labels for classification, float32 targets for regression.
    extras: source-specific facts (e.g. the noise level of synthetic-linear).

    Loaded data sets are cached and shared: treat the tensors as read-only
    (copy before changing them in place).
    """

    info: DatasetInfo
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    extras: dict = field(default_factory=dict)
