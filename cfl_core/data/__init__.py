"""Data sources: every source loads into the same small Dataset (see base.py).

    load_dataset(name, data_dir=None, download=False, seed=0) -> Dataset
    dataset_info(name) -> DatasetInfo      static facts, loads nothing
    data_source(name) -> DataSource        the source's record: description, traits, locate/load
    source_status() -> list[SourceStatus]  what is available here, how to get the rest
"""
from .bad_file import BadDataFile
from .base import CLASSIFICATION, REGRESSION, Dataset, DatasetInfo, DataSource, LinearMixture, Located
from .registry import (DATA_SOURCES, SOURCES, SourceStatus, data_source, dataset_info, download_source,
                       load_dataset, source_status)

__all__ = [
    "BadDataFile",
    "CLASSIFICATION",
    "DATA_SOURCES",
    "REGRESSION",
    "DataSource",
    "Dataset",
    "DatasetInfo",
    "LinearMixture",
    "Located",
    "SOURCES",
    "SourceStatus",
    "data_source",
    "dataset_info",
    "download_source",
    "load_dataset",
    "source_status",
]
