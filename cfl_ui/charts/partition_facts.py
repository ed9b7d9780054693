"""A partition before any training: who holds what, and what the clusters' data look like.

`partition_facts(config_dict)` builds the partition with the core (no training,
no federation) and returns plain data: the partition's JSON (cluster, sizes and
label counts of every client) and rows of sample images per cluster. For
feature skew and concept shift the SAME source images go through every
cluster's transform, so the rotation or the swapped label is what differs.
"""
from __future__ import annotations

import numpy as np

from cfl_core.config import CLIENT_FIELDS as PARTITION_KEYS  # the fields that define the clients

IMAGES_PER_ROW = 8


def partition_config(config: dict):
    from cfl_core.partition import PartitionConfig

    return PartitionConfig(**{k: config[k] for k in PARTITION_KEYS if k in config})


def image_caption(label: int, before: int | None = None) -> str:
    """A sample image's caption: its label, "5→3" when the cluster's label map turned a 5 into a 3. Short on
    purpose: eight captions share a row that an 800-px window makes about 40 px per image."""
    return str(label) if before is None or before == label else f"{before}→{label}"


def _source_images(ds, count: int) -> list[int]:
    """Rows of the train pool: the first image of every class in label order (no digit left out: 10 for 10
    classes), then the next ones up to `count`."""
    y = ds.y_train.numpy() if ds.info.task == "classification" else np.zeros(len(ds.x_train), int)
    first: dict = {}
    for i, label in enumerate(y):
        first.setdefault(int(label), i)
    picked = [first[label] for label in sorted(first)]
    i = 0
    while len(picked) < count and i < len(y):
        if i not in picked:
            picked.append(i)
        i += 1
    return picked[:max(count, len(first))]


def partition_facts(config: dict) -> dict:
    """{"partition": partition JSON, "rows": [(title, images [n, C, H, W], captions)], "note": str}."""
    import torch

    from cfl_core.data import load_dataset
    from cfl_core.partition import build_partition
    from cfl_core.partition import transforms

    pcfg = partition_config(config)
    ds = load_dataset(pcfg.dataset, seed=pcfg.seed)
    part = build_partition(ds, pcfg)
    pj = part.to_json()
    rows, note = [], ""
    if ds.info.is_image:
        per_cluster: dict[int, dict] = {}
        for spec in part.clients:
            per_cluster.setdefault(spec.cluster, {"transform": spec.transform, "clients": []})["clients"].append(spec)
        transformed = pcfg.partition in ("feature-skew", "concept-shift")
        if transformed:
            idx = torch.as_tensor(_source_images(ds, IMAGES_PER_ROW))
            x0, y0 = ds.x_train[idx], ds.y_train[idx]
            for c in sorted(per_cluster):
                t = per_cluster[c]["transform"]
                x, y = transforms.apply(t, x0, y0, part.truth, pcfg.seed, per_cluster[c]["clients"][0].id, 0)
                caps = []
                for before, after in zip(y0.tolist(), y.tolist()):
                    caps.append(image_caption(after, before))
                title = f"cluster {c}" + (f" · {t['rotation']}°" if "rotation" in t else "")
                rows.append((title, x.numpy(), caps))
            note = ("The same training images seen by each cluster, each captioned with its label there: "
                    + ("rotated by the cluster's angle." if pcfg.partition == "feature-skew"
                       else "identical pixels, but the cluster's label map swaps two pairs of labels "
                            "(5→3: the image of a 5 is labelled 3 in that cluster)."))
        else:
            for c in sorted(per_cluster):
                specs = per_cluster[c]["clients"]
                take = []
                for spec in specs:
                    take += [int(i) for i in spec.train_idx[: max(1, IMAGES_PER_ROW // len(specs) + 1)]]
                take = take[:IMAGES_PER_ROW]
                idx = torch.as_tensor(take, dtype=torch.int64)
                x, y = ds.x_train[idx], ds.y_train[idx]
                rows.append((f"cluster {c}", x.numpy(), [image_caption(v) for v in y.tolist()]))
            note = ("Training images held by each cluster's clients, each captioned with its label (the labels "
                    "show the cluster's label mix).")
    else:
        note = f"{ds.info.name} holds vectors, not images: no sample images to show."
    return {"partition": pj, "rows": rows, "note": note, "num_classes": ds.info.num_classes,
            "task": ds.info.task, "test_disjoint": part.test_disjoint}
