"""Clients drawn spread over the true clusters: newcomers (dynamics.py) and unseen clients (conditions/unseen.py)
are taken round-robin, one cluster after another, so every cluster gives some when it can."""
from __future__ import annotations

import numpy as np
import torch


def spread_over_clusters(rng: np.random.Generator, clusters: torch.Tensor, count: int, skip=()) -> list[int]:
    """`count` client ids in the order drawn: each cluster's members shuffled by `rng` (one permutation per cluster,
    in cluster order), never one of `skip`, taken round-robin. The caller makes sure enough remain."""
    skip = set(skip)
    by_cluster = [[c for c in rng.permutation(np.flatnonzero(clusters.numpy() == k)).tolist() if c not in skip]
                  for k in sorted(set(clusters.tolist()))]
    chosen: list[int] = []
    while len(chosen) < count:
        for members in by_cluster:
            if members and len(chosen) < count:
                chosen.append(members.pop())
    return chosen
