"""Cluster structures from plugins: what one declares, and the check it passes before it is registered.

A structure says what makes its clusters differ in the two ways the partition builder knows: each
cluster's label distribution (`label_weights`) and each cluster's transform of the inputs or labels
(`transforms`: {} none, {"rotation": degrees} for images, {"label_map": [new label of each class]}).
Within-cluster splits (iid, dirichlet, pathological), sample drawing, test sets and the checks of pool
capacity then work for it as for the built-in structures (cfl_core/partition/structures.py).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..data.base import DatasetInfo
from ..errors import ConfigError
from ..registry import PluginRefused, check_plugin_name

# what a structure may ask of the pools and inputs it is probed with at admission
PROBE_INFO = DatasetInfo("plugin-probe", "classification", (1, 8, 8), 10, 1000, 500)
PROBE_CLUSTERS = 2


@dataclass(frozen=True)
class ClusterStructure:
    name: str
    help: str  # one line: what differs between the clusters
    # (clusters, train pool's samples per class) -> [clusters, classes] label distribution, rows sum to 1
    label_weights: Callable[[int, np.ndarray], np.ndarray]
    # (clusters, data set info, seed) -> one transform per cluster; None: no transform
    transforms: Callable[[int, DatasetInfo, int], list[dict]] | None = None
    # (clusters, data set info) -> None, or raise ConfigError for what cannot work
    check: Callable[[int, DatasetInfo], None] | None = None
    images_only: bool = False  # it rotates inputs: refused on vector sources


PLUGIN_STRUCTURES: dict[str, ClusterStructure] = {}  # filled as the registry admits them


def admit_structure(entry_name: str, obj) -> str:
    """Register a plugin's structure; returns its help (what the registry of partitions holds)."""
    if not isinstance(obj, ClusterStructure):
        raise PluginRefused(f"it is {obj!r}, not a cfl_core.partition.ClusterStructure")
    check_plugin_name(entry_name, obj.name)
    if not isinstance(obj.help, str) or not obj.help.strip():
        raise PluginRefused("its help must be a one-line text")
    if not callable(obj.label_weights) or (obj.transforms is not None and not callable(obj.transforms)):
        raise PluginRefused("label_weights (and transforms, when given) must be callable")
    try:
        if obj.check is not None:
            obj.check(PROBE_CLUSTERS, PROBE_INFO)
        probe = True
    except ConfigError:
        probe = False  # it may refuse the probe's shape; its outputs are checked again at every use
    if probe:
        try:
            plugin_weights(obj, PROBE_CLUSTERS, np.full(PROBE_INFO.num_classes, 100))
            plugin_transforms(obj, PROBE_CLUSTERS, PROBE_INFO, 0)
        except ConfigError as exc:
            raise PluginRefused(exc.allowed) from None
    PLUGIN_STRUCTURES[entry_name] = obj
    return obj.help


def _broken(structure: ClusterStructure, what: str) -> ConfigError:
    """A structure whose output breaks the contract: refused by name wherever it is used."""
    return ConfigError("partition", structure.name, f"a structure whose {what} (the plugin breaks the contract)")


def plugin_weights(structure: ClusterStructure, clusters: int, supply: np.ndarray) -> np.ndarray:
    weights = np.asarray(structure.label_weights(clusters, np.asarray(supply)), dtype=np.float64)
    if weights.shape != (clusters, len(supply)) or not np.all(np.isfinite(weights)) or np.any(weights < 0) or \
            not np.allclose(weights.sum(1), 1.0):
        raise _broken(structure, f"label_weights gave {weights.shape} values; it must give [clusters, classes] = "
                                 f"[{clusters}, {len(supply)}] non-negative weights, each row summing to 1")
    return weights


def plugin_transforms(structure: ClusterStructure, clusters: int, info: DatasetInfo, seed: int) -> list[dict]:
    if structure.transforms is None:
        return [{} for _ in range(clusters)]
    out = list(structure.transforms(clusters, info, seed))
    if len(out) != clusters:
        raise _broken(structure, f"transforms gave {len(out)} transforms for {clusters} clusters")
    for transform in out:
        if not isinstance(transform, dict) or set(transform) - {"rotation", "label_map"}:
            raise _broken(structure, f"transforms gave {transform!r}: each must be {{}}, {{'rotation': degrees}} "
                                     "and/or {'label_map': [...]}")
        rotation = transform.get("rotation", 0)
        if not isinstance(rotation, numbers.Real) or isinstance(rotation, bool) or not np.isfinite(rotation):
            raise _broken(structure, f"transforms gave the rotation {rotation!r}: a number of degrees")
        if "rotation" in transform and not info.is_image:
            raise _broken(structure, "transforms rotated the inputs of a vector source (set images_only=True)")
        if "label_map" in transform and sorted(transform["label_map"]) != list(range(info.num_classes)):
            raise _broken(structure, f"transforms gave the label map {transform['label_map']!r}: a permutation "
                                     f"of the {info.num_classes} classes")
    return out
