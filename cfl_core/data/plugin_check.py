"""What a data source from a plugin must be before it is registered (see cfl_core/registry.py)."""
from __future__ import annotations

from ..registry import PluginRefused, check_plugin_name
from .base import CLASSIFICATION, REGRESSION, DatasetInfo, DataSource


def admit_source(entry_name: str, obj) -> DataSource:
    if not isinstance(obj, DataSource):
        raise PluginRefused(f"it is {obj!r}, not a cfl_core.DataSource")
    check_plugin_name(entry_name, obj.name)
    info = obj.info
    if not isinstance(info, DatasetInfo) or info.name != obj.name:
        raise PluginRefused("its info must be a DatasetInfo with the source's own name")
    if info.task not in (CLASSIFICATION, REGRESSION):
        raise PluginRefused(f"info.task must be {CLASSIFICATION!r} or {REGRESSION!r}, not {info.task!r}")
    if info.task == CLASSIFICATION and (not isinstance(info.num_classes, int) or info.num_classes < 2):
        raise PluginRefused("a classification source needs info.num_classes >= 2")
    if not info.input_shape or not all(isinstance(d, int) and d > 0 for d in info.input_shape) or \
            len(info.input_shape) not in (1, 3):
        raise PluginRefused("info.input_shape must be (d,) for vectors or (C, H, W) for images")
    if not (isinstance(info.n_train, int) and info.n_train > 0 and isinstance(info.n_test, int) and info.n_test > 0):
        raise PluginRefused("info.n_train and info.n_test must be positive whole numbers")
    if not callable(obj.load):
        raise PluginRefused("its load must be callable: (key, seed) -> Dataset")
    if obj.locate is not None and not callable(obj.locate):
        raise PluginRefused("its locate must be callable (or None for a source built in the package)")
    return obj
