"""Drawing sample indices that follow a plan of label counts."""
from __future__ import annotations

import numpy as np

STREAM_TRAIN = 14
STREAM_TEST = 15
STREAM_REPLACE = 16
_CHUNK = 4096  # clients per vectorised draw (bounds the [clients, class members] key matrix)


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


def draw_with_replacement(labels: np.ndarray, counts: np.ndarray, seed: int) -> list[np.ndarray]:
    """Indices into the pool for each client, drawn independently of the other clients
    (`sample_with_replacement`): clients may share samples, so any plan can be served.

    Inside one client a sample appears at most once while its class has enough members
    (a uniform random subset per client and class); a client that asks for more of a class
    than the pool holds gets every member and the rest drawn uniformly with repeats."""
    rng = np.random.default_rng([seed, STREAM_REPLACE])
    picked: list[list[np.ndarray]] = [[] for _ in range(len(counts))]
    for c in range(counts.shape[1]):
        members = np.flatnonzero(labels == c)
        demand = counts[:, c]
        wanting = np.flatnonzero(demand)
        if len(wanting) == 0:
            continue
        if len(members) == 0:
            raise ValueError(f"plan asks {int(demand.sum())} of class {c}, the pool has none")
        for lo in range(0, len(wanting), _CHUNK):
            block = wanting[lo:lo + _CHUNK]
            # a random permutation of the class per client: the first demand[i] members are its subset
            order = np.argsort(rng.random((len(block), len(members))), axis=1)
            for row, i in enumerate(block):
                need = int(demand[i])
                take = members[order[row, :need]]
                if need > len(members):
                    take = np.concatenate([take, rng.choice(members, size=need - len(members))])
                picked[i].append(take)
    return [np.sort(np.concatenate(p)) if p else np.zeros(0, dtype=np.int64) for p in picked]


def draw_test(labels: np.ndarray, counts: np.ndarray, seed: int,
              stream: int = STREAM_TEST) -> tuple[list[np.ndarray], bool]:
    """Test indices per client, and whether they are disjoint across clients.

    A class whose pool covers every client's demand is dealt out disjointly.
    Otherwise each client draws that class independently (without replacement
    inside the client while the pool allows), so clients may share test samples;
    never training ones, since the test pool is separate. A class missing from
    the pool is skipped, leaving the client a smaller test set. `stream`: another
    purpose's draw from the same pool (IFCA's test machines)."""
    rng = np.random.default_rng([seed, stream])
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
