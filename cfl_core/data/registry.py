"""The table of data sources: static facts, where each is found, and loading."""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from ..errors import ConfigError, DataUnavailable
from . import cifar, digits, mnist, synthetic
from .base import Dataset, DatasetInfo

DESCRIPTIONS = {
    "digits": "scikit-learn's bundled 8x8 handwritten digits; instant, no download",
    "fashion-mnist": "Zalando's 28x28 clothing images (IDX files)",
    "mnist": "28x28 handwritten digits (IDX files)",
    "cifar10": "32x32 colour images in 10 classes (python pickle batches)",
    "synthetic-linear": (
        f"mixture of linear regressions, x ~ N(0, I_{synthetic.LINEAR_DIM}), "
        f"noise sigma {synthetic.LINEAR_NOISE_SIGMA}; the partition draws the cluster parameters"
    ),
    "synthetic-blobs": f"{synthetic.BLOB_CLASSES} Gaussian blobs in {synthetic.BLOB_DIM}-d; trains instantly",
}
STATIC_INFO = {
    "digits": digits.STANDARD_INFO,
    "fashion-mnist": mnist.STANDARD_INFO["fashion-mnist"],
    "mnist": mnist.STANDARD_INFO["mnist"],
    "cifar10": cifar.STANDARD_INFO,
    "synthetic-linear": synthetic.LINEAR_INFO,
    "synthetic-blobs": synthetic.BLOBS_INFO,
}
SOURCES: tuple[str, ...] = tuple(STATIC_INFO)
FILE_SOURCES = ("fashion-mnist", "mnist", "cifar10")
SEEDED_SOURCES = ("synthetic-linear", "synthetic-blobs")


@dataclass(frozen=True)
class SourceStatus:
    name: str
    available: bool
    description: str
    how_to_get: str  # "" when available
    location: str | None  # the folder the files were found in; "built in" for bundled sources


def check_name(name: str) -> None:
    if name not in STATIC_INFO:
        raise ConfigError("dataset", name, "one of " + ", ".join(SOURCES))


def dataset_info(name: str) -> DatasetInfo:
    """Static facts about a source, without loading (or even finding) its data.

    For file sources these are the published sizes; load_dataset(...).info
    reports what the files on this machine actually hold."""
    check_name(name)
    return STATIC_INFO[name]


def _how_to_get(name: str) -> str:
    return cifar.how_to_get() if name == "cifar10" else mnist.how_to_get(name)


def _locate(name: str, data_dir: str | None):
    """(key identifying the files found or None, folder found or None, folders searched)."""
    if name == "cifar10":
        folder, searched = cifar.locate(data_dir)
        return folder, folder, searched
    files, searched = mnist.locate(name, data_dir)
    if files is None:
        return None, None, searched
    return tuple(sorted(files.items())), os.path.dirname(files["train_images"]), searched


def source_status(data_dir: str | None = None) -> list["SourceStatus"]:
    """Every source, whether it can be loaded here, and if not how to get it. Loads nothing."""
    statuses = []
    for name in SOURCES:
        if name in FILE_SOURCES:
            _, folder, _ = _locate(name, data_dir)
            available = folder is not None
            statuses.append(SourceStatus(name, available, DESCRIPTIONS[name],
                                         "" if available else _how_to_get(name), folder))
        else:
            statuses.append(SourceStatus(name, True, DESCRIPTIONS[name], "", "built in"))
    return statuses


@functools.lru_cache(maxsize=16)
def _load_cached(name: str, key, seed: int) -> Dataset:
    # Keyed on what was found, not on the search inputs, so the same files load once.
    if name == "digits":
        return digits.load()
    if name == "synthetic-linear":
        return synthetic.load_linear(seed)
    if name == "synthetic-blobs":
        return synthetic.load_blobs(seed)
    if name == "cifar10":
        return cifar.load(key)
    return mnist.load(name, dict(key))


def download_source(name: str, data_dir: str | None = None) -> None:
    """Fetch a file source with torchvision (needs a network). Bundled sources need nothing."""
    check_name(name)
    if name not in FILE_SOURCES:
        return  # nothing to fetch
    if name == "cifar10":
        cifar.download(data_dir)
    else:
        mnist.download(name, data_dir)


def load_dataset(name: str, *, data_dir: str | None = None, download: bool = False, seed: int = 0) -> Dataset:
    """Load a source into CPU tensors (see Dataset).

    data_dir: a folder searched before $CFL_DATA_DIR and ./data.
    download: fetch a missing file source with torchvision (never otherwise).
    seed: draws the synthetic pools; the real sources ignore it.
    Results are cached in-process and shared between callers: never modify
    the returned tensors in place.
    """
    check_name(name)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError("seed", seed, "a non-negative integer")
    if name not in FILE_SOURCES:
        return _load_cached(name, None, seed if name in SEEDED_SOURCES else 0)
    key, _, searched = _locate(name, data_dir)
    if key is None and download:
        download_source(name, data_dir)
        key, _, searched = _locate(name, data_dir)
    if key is None:
        raise DataUnavailable(name, searched, _how_to_get(name))
    return _load_cached(name, key, 0)
