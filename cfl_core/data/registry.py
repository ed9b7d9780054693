"""The registry of data sources (name -> DataSource) and the functions that find, describe and load them."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from ..errors import ConfigError, DataUnavailable
from ..registry import Names, Registry
from . import agnews, cifar, digits, femnist, mnist, synthetic
from .base import Dataset, DatasetInfo, DataSource
from .plugin_check import admit_source

# The registry: name -> source, built here from the sources' own names; each source is defined in
# its own module. This order is the order every list of sources shows; installed plugins' sources follow
# (entry-point group `cfl_lab.datasets`, see cfl_core/registry.py).
DATA_SOURCES: Registry = Registry("cfl_lab.datasets", {source.name: source for source in (
    digits.SOURCE,
    mnist.FASHION_MNIST,
    mnist.MNIST,
    cifar.SOURCE,
    femnist.SOURCE,
    agnews.SOURCE,
    synthetic.LINEAR,
    synthetic.BLOBS,
)}, admit_source)
SOURCES: Names = Names(DATA_SOURCES)  # the names, plugins included


@dataclass(frozen=True)
class SourceStatus:
    name: str
    available: bool
    description: str
    how_to_get: str  # "" when available
    location: str | None  # the folder the files were found in; "built in" for bundled sources


def check_name(name: str) -> None:
    if name not in DATA_SOURCES:
        raise ConfigError("dataset", name, "one of " + ", ".join(DATA_SOURCES))


def data_source(name: str) -> DataSource:
    """The source record of a name (ConfigError naming `dataset` for an unknown one)."""
    check_name(name)
    return DATA_SOURCES[name]


def dataset_info(name: str) -> DatasetInfo:
    """Static facts about a source, without loading (or even finding) its data.

    For file sources these are the published sizes; load_dataset(...).info
    reports what the files on this machine actually hold."""
    return data_source(name).info


def source_status(data_dir: str | None = None) -> list["SourceStatus"]:
    """Every source, whether it can be loaded here, and if not how to get it. Loads nothing."""
    statuses = []
    for source in DATA_SOURCES.values():
        if source.file_based:
            folder = source.locate(data_dir).folder
            available = folder is not None
            statuses.append(SourceStatus(source.name, available, source.description,
                                         "" if available else source.how_to_get, folder))
        else:
            statuses.append(SourceStatus(source.name, True, source.description, "", "built in"))
    return statuses


@functools.lru_cache(maxsize=16)
def _load_cached(name: str, key, seed: int) -> Dataset:
    # Keyed on what was found, not on the search inputs, so the same files load once.
    return DATA_SOURCES[name].load(key, seed)


def download_source(name: str, data_dir: str | None = None) -> None:
    """Fetch a file source with torchvision (needs a network). Bundled sources need nothing; a file source
    without a public mirror (FEMNIST, AG News) says how to get it instead."""
    source = data_source(name)
    if source.download is not None:
        source.download(data_dir)
    elif source.file_based:
        raise DataUnavailable(name, [], f"no download for {name}: {source.how_to_get}")


def load_dataset(name: str, *, data_dir: str | None = None, download: bool = False, seed: int = 0) -> Dataset:
    """Load a source into CPU tensors (see Dataset).

    data_dir: a folder searched before $CFL_DATA_DIR and ./data.
    download: fetch a missing file source with torchvision (never otherwise).
    seed: draws the synthetic pools; the real sources ignore it.
    Results are cached in-process and shared between callers: never modify
    the returned tensors in place.
    """
    source = data_source(name)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError("seed", seed, "a non-negative integer")
    if not source.file_based:
        return _load_cached(name, None, seed if source.seeded else 0)
    found = source.locate(data_dir)
    if found.key is None and download:
        download_source(name, data_dir)
        found = source.locate(data_dir)
    if found.key is None:
        raise DataUnavailable(name, found.searched, source.how_to_get)
    return _load_cached(name, found.key, 0)
