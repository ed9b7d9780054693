"""What every data source is described by (DataSource, its traits) and the uniform Dataset it loads into."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Mapping, NamedTuple

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
    # Natural clients (FEMNIST's writers): how many the source has; 0 = none (every sample is in one pool).
    natural_clients: int = 0

    @property
    def is_image(self) -> bool:
        return len(self.input_shape) == 3


@dataclass
class Dataset:
    """Train and test pools as CPU tensors.

    x: float32 [N, *input_shape]; images scaled to [0, 1].
    y: int64 class labels for classification, float32 targets for regression.
    extras: source-specific facts (e.g. the noise level of synthetic-linear).
    train_owner / test_owner: for a source with natural clients, the natural client (writer) of
    each sample, 0..natural_clients-1; None otherwise. `owner_names` names them (e.g. LEAF's user ids).

    Loaded data sets are cached and shared: treat the tensors as read-only
    (copy before changing them in place).
    """

    info: DatasetInfo
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    extras: dict = field(default_factory=dict)
    train_owner: torch.Tensor | None = None
    test_owner: torch.Tensor | None = None
    owner_names: tuple[str, ...] = ()


class Located(NamedTuple):
    """Where a file source's files were looked for, and what was found."""

    key: Hashable | None  # identifies the files found (what `load` reads, and the load cache key); None: missing
    folder: str | None  # the folder they were found in
    searched: list[str]  # every folder looked in, in order


@dataclass(frozen=True)
class LinearMixture:
    """A regression source whose clusters differ by true parameters that the partition draws."""

    noise_sigma: float  # y = x . theta_k + N(0, noise_sigma^2)
    min_separation: float  # the clusters' thetas are at least this far apart


@dataclass(frozen=True)
class DataSource:
    """One data source: what it is, what it supports, where its files are and how it loads.

    Every question the rest of the core asks about a data set is answered here
    (never by its name), so a new data set is one module defining its
    DataSource and one line in registry.py.
    """

    name: str
    description: str  # one line, shown by `python -m cfl_core datasets` and the dashboard
    info: DatasetInfo  # static facts, known without loading (file sources: the published sizes)
    load: Callable[[Any, int], Dataset]  # (Located.key, or None for a built-in source; seed) -> Dataset
    locate: Callable[[str | None], Located] | None = None  # file sources: search data_dir, $CFL_DATA_DIR, ./data
    download: Callable[[str | None], None] | None = None  # fetch the files into the first of those folders
    how_to_get: str = ""  # what to do when the files are missing
    seeded: bool = False  # the run's seed draws the pools (the synthetic sources); the others ignore it
    supports_unsupervised: bool = False  # the autoencoder can learn its inputs (the image sources)
    linear_mixture: LinearMixture | None = None  # the linear-mixture partition applies
    # CFL's (eps1, eps2) per model family where this data set changes the scale of the model's
    # updates (see algorithms/cfl.py); families not named keep CFL's per-family defaults.
    cfl_eps: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def file_based(self) -> bool:
        """Read from files found on this machine (else built in: bundled or drawn)."""
        return self.locate is not None

    @property
    def is_image(self) -> bool:
        return self.info.is_image

    @property
    def image_shape(self) -> tuple[int, int, int] | None:
        """(C, H, W) for an image source, None for vector inputs."""
        return self.info.input_shape if self.is_image else None
