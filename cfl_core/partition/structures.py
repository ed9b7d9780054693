"""What makes the clusters differ: label supports and weights, rotations,
label swaps, and the true parameters of a linear mixture (CLoVE's structures)."""
from __future__ import annotations

import numpy as np

from ..data.base import REGRESSION, DatasetInfo
from ..data.registry import DATA_SOURCES, data_source
from ..data.synthetic import draw_thetas
from ..errors import ConfigError
from ..registry import Names, Registry
from .plugin_check import PLUGIN_STRUCTURES, admit_structure, plugin_transforms, plugin_weights

LABEL_SKEWS = ("label-skew-1", "label-skew-2", "label-skew-3", "label-skew-4")
# The registry: name -> one-line help, in the order every list shows; PARTITIONS is its names
# (like data.SOURCES for data.DATA_SOURCES). The structures themselves are the functions below; installed
# plugins' structures follow (entry-point group `cfl_lab.partitions`, plugin_check.py, cfl_core/registry.py).
PARTITION_HELP: Registry = Registry("cfl_lab.partitions", {
    "label-skew-1": "clusters own disjoint groups of labels (the classes dealt out over the clusters in order)",
    "label-skew-2": "cluster k holds 4 labels {2k..2k+3} mod C: neighbouring clusters share 2",
    "label-skew-3": "cluster k holds every class but class k",
    "label-skew-4": "cluster k has a dominant class k (2/3 of its data), the rest uniform",
    "feature-skew": "cluster k sees inputs rotated by 360*k/K degrees (0/90/180/270 for 4); images only",
    "concept-shift": "same inputs, cluster k swaps two pairs of labels (cluster 0 keeps them)",
    "iid": "one distribution for every cluster: the control, the right answer is one cluster",
    "linear-mixture": "synthetic-linear only: cluster k's targets are y = x . theta_k + noise",
}, admit_structure)
PARTITIONS: Names = Names(PARTITION_HELP)
LABEL_SKEW_2_SET_SIZE = 4
LABEL_SKEW_4_DOMINANT = 2 / 3

# Streams of randomness, one per purpose, so that changing one never shifts another.
STREAM_LABEL_MAPS = 11


def plugin_structure(partition: str):
    """The ClusterStructure of a plugin's partition, None for a built-in (or unknown) name."""
    if partition in PARTITION_HELP:  # loads the plugins on first use
        return PLUGIN_STRUCTURES.get(partition)
    return None


def pairs_swaps_count(num_classes: int) -> int:
    """Number of distinct maps that swap two disjoint pairs of labels."""
    c = num_classes
    return c * (c - 1) * (c - 2) * (c - 3) // 8


def check_structure(partition: str, clusters: int, info: DatasetInfo) -> None:
    """ConfigError when the partition cannot be built on this source with this many clusters."""
    regression = info.task == REGRESSION
    classes = info.num_classes
    custom = plugin_structure(partition)
    if custom is not None:
        if regression:
            raise ConfigError("partition", partition, f"linear-mixture or iid for the regression source {info.name}")
        if custom.images_only and not info.is_image:
            raise ConfigError("partition", partition, f"an image source; {info.name} has vector inputs")
        if custom.check is not None:
            custom.check(clusters, info)
        return
    if partition == "linear-mixture" and data_source(info.name).linear_mixture is None:
        mixtures = " or ".join(s.name for s in DATA_SOURCES.values() if s.linear_mixture is not None)
        raise ConfigError("partition", partition, f"linear-mixture needs dataset {mixtures}")
    if regression and partition not in ("linear-mixture", "iid"):
        raise ConfigError("partition", partition, f"linear-mixture or iid for the regression source {info.name}")
    if partition == "feature-skew" and not info.is_image:
        images = ", ".join(s.name for s in DATA_SOURCES.values() if s.is_image)
        raise ConfigError("partition", partition, f"an image source ({images}); {info.name} has vector inputs")
    if partition == "label-skew-1" and clusters > classes // 2:
        raise ConfigError("clusters", clusters,
                          f"at most {classes // 2} for label-skew-1 on {info.name}: {classes} classes, "
                          "at least 2 labels per cluster")
    if partition == "label-skew-2":
        if classes < 6:
            raise ConfigError("partition", partition, "a source with at least 6 classes")
        if clusters > classes // 2:
            raise ConfigError("clusters", clusters,
                              f"at most {classes // 2} for label-skew-2 on {info.name}: more would repeat label sets")
    if partition in ("label-skew-3", "label-skew-4") and clusters > classes:
        raise ConfigError("clusters", clusters, f"at most {classes} for {partition} on {info.name}: one class per cluster")
    if partition == "concept-shift":
        if classes < 4:
            raise ConfigError("partition", partition, "a source with at least 4 classes (two pairs to swap)")
        if clusters > pairs_swaps_count(classes) + 1:
            raise ConfigError("clusters", clusters,
                              f"at most {pairs_swaps_count(classes) + 1} distinct label maps for {classes} classes")


def label_supports(partition: str, clusters: int, num_classes: int) -> list[np.ndarray]:
    """The labels each cluster may hold (all of them unless a label skew says otherwise)."""
    custom = plugin_structure(partition)
    if custom is not None:
        weights = plugin_weights(custom, clusters, np.ones(num_classes, dtype=np.int64))
        return [np.flatnonzero(row > 0) for row in weights]
    every = np.arange(num_classes)
    if partition == "label-skew-1":
        return list(np.array_split(every, clusters))
    if partition == "label-skew-2":
        return [np.sort((2 * k + np.arange(LABEL_SKEW_2_SET_SIZE)) % num_classes) for k in range(clusters)]
    if partition == "label-skew-3":
        return [np.delete(every, k) for k in range(clusters)]
    return [every for _ in range(clusters)]


def cluster_weights(partition: str, clusters: int, supply: np.ndarray) -> np.ndarray:
    """[clusters, classes] label distribution of each cluster, rows sum to 1.

    Labels in a cluster's support are weighted by how many the pool holds, so
    a cluster asks for each label in proportion to what exists (uniform on
    balanced sources). label-skew-4 is explicit: 2/3 dominant, rest uniform."""
    num_classes = len(supply)
    custom = plugin_structure(partition)
    if custom is not None:
        return plugin_weights(custom, clusters, supply)
    weights = np.zeros((clusters, num_classes))
    if partition == "label-skew-4":
        for k in range(clusters):
            weights[k] = (1 - LABEL_SKEW_4_DOMINANT) / (num_classes - 1)
            weights[k, k] = LABEL_SKEW_4_DOMINANT
        return weights
    for k, support in enumerate(label_supports(partition, clusters, num_classes)):
        w = supply[support].astype(np.float64)
        weights[k, support] = w / w.sum() if w.sum() > 0 else 1.0 / len(support)
    return weights


def rotation_angles(clusters: int) -> list[float | int]:
    """An even spread of angles, in degrees; whole numbers stay ints (exact rot90 for multiples of 90)."""
    angles = []
    for k in range(clusters):
        a = round(360.0 * k / clusters, 6)
        angles.append(int(a) if float(a).is_integer() else a)
    return angles


def label_swap_maps(clusters: int, num_classes: int, seed: int) -> list[list[int]]:
    """Cluster 0 keeps the identity; every other cluster swaps two disjoint pairs.
    All maps differ; the draw depends only on the seed."""
    rng = np.random.default_rng([seed, STREAM_LABEL_MAPS])
    identity = list(range(num_classes))
    maps, seen = [identity], {tuple(identity)}
    while len(maps) < clusters:
        a, b, c, d = (int(v) for v in rng.permutation(num_classes)[:4])
        m = list(identity)
        m[a], m[b] = b, a
        m[c], m[d] = d, c
        if tuple(m) not in seen:
            seen.add(tuple(m))
            maps.append(m)
    return maps


def cluster_transforms(partition: str, clusters: int, info: DatasetInfo, seed: int) -> tuple[list[dict], dict]:
    """(transform per cluster, truth). The transform is what defines a cluster's
    data beyond its labels; truth holds the true parameters where there are any."""
    if partition == "feature-skew":
        return [{"rotation": a} for a in rotation_angles(clusters)], {}
    if partition == "concept-shift":
        return [{"label_map": m} for m in label_swap_maps(clusters, info.num_classes, seed)], {}
    linear = data_source(info.name).linear_mixture
    if linear is not None:
        # iid on a linear-mixture source is one regression shared by all clusters. truth["theta"]
        # keeps one row per cluster either way, so truth["theta"][cluster] always works.
        mixture = partition == "linear-mixture"
        thetas = draw_thetas(clusters if mixture else 1, info.input_shape[0], linear.min_separation, seed)
        rows = thetas.tolist() if mixture else thetas.tolist() * clusters
        transforms = [{"theta": k if mixture else 0} for k in range(clusters)]
        truth = {"theta": rows, "noise_sigma": linear.noise_sigma, "min_separation": linear.min_separation}
        return transforms, truth
    return [{} for _ in range(clusters)], {}
