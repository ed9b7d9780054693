"""Drawing sample indices that follow a plan of label counts."""
from __future__ import annotations

import numpy as np

STREAM_TRAIN = 14
STREAM_TEST = 15


def draw_disjoint(labels: np.ndarray, counts: np.ndarray, seed: int) -> list[np.ndarray]:
    """Indices into the pool for each client, no index given twice (the plan fits the pool)."""
    rng = np.random.default_rng([seed, STREAM_TRAIN])
    picked: list[list[np.ndarray]] = [[] for _ in range(len(counts))]
    for c in range(counts.shape[1]):
        members = rng.permutation(np.flatnonzero(labels == c))
        ends = np.cumsum(counts[:, c])
        if ends[-1] > len(members):
            raise ValueError(f"plan asks {ends[-1]} of class {c}, the pool has {len(members)}")
        starts = ends - counts[:, c]
        for i in np.flatnonzero(counts[:, c]):
            picked[i].append(members[starts[i]:ends[i]])
    return [np.sort(np.concatenate(p)) if p else np.zeros(0, dtype=np.int64) for p in picked]


def draw_test(labels: np.ndarray, counts: np.ndarray, seed: int) -> tuple[list[np.ndarray], bool]:
    """Test indices per client, and whether they are disjoint across clients.

    A class whose pool covers every client's demand is dealt out disjointly.
    Otherwise each client draws that class independently (without replacement
    inside the client while the pool allows), so clients may share test samples;
    never training ones, since the test pool is separate. A class missing from
    the pool is skipped, leaving the client a smaller test set."""
    rng = np.random.default_rng([seed, STREAM_TEST])
    picked: list[list[np.ndarray]] = [[] for _ in range(len(counts))]
    disjoint = True
    for c in range(counts.shape[1]):
        members = np.flatnonzero(labels == c)
        demand = counts[:, c]
        if demand.sum() <= len(members):
            shuffled = rng.permutation(members)
            ends = np.cumsum(demand)
            for i in np.flatnonzero(demand):
                picked[i].append(shuffled[ends[i] - demand[i]:ends[i]])
            continue
        disjoint = False
        if len(members) == 0:
            continue
        for i in np.flatnonzero(demand):
            picked[i].append(rng.choice(members, size=demand[i], replace=demand[i] > len(members)))
    return [np.sort(np.concatenate(p)) if p else np.zeros(0, dtype=np.int64) for p in picked], disjoint
