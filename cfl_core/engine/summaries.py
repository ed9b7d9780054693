"""Summaries a client computes from its own inputs, for the one-shot clustering by data distance (k-FED, PACFL).

Pure functions over the federation's padded tensors: each client uses only its
own valid training rows. The engine wraps them (`Engine.upload_local_centres`,
`Engine.upload_subspaces`) so that what the clients send is counted.
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.linalg import subspace_angles
from sklearn.cluster import KMeans

from .federation import Federation
from .seeding import derive_seed


def client_inputs(fed: Federation, client: int) -> np.ndarray:
    """One client's training inputs, flattened, [n, d] float64."""
    n = int(fed.n_train[client])
    return fed.x_train[client, :n].reshape(n, -1).double().cpu().numpy()


def client_labels(fed: Federation, client: int) -> np.ndarray:
    n = int(fed.n_train[client])
    return fed.y_train[client, :n].cpu().numpy()


def local_centres(fed: Federation, client: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """k-means on the client's own inputs: (centres [k', d], points per centre [k']), k' = min(k, n)."""
    x = client_inputs(fed, client)
    k = max(1, min(k, len(x)))
    km = KMeans(k, n_init=10, random_state=derive_seed(seed, "kfed-local", client) % 2**31).fit(x)
    return km.cluster_centers_, np.bincount(km.labels_, minlength=k)


def top_subspace(fed: Federation, client: int, p: int, per_class: bool) -> np.ndarray:
    """Top-p left singular vectors of the client's data matrix (d x n), [d, p] (orthonormal columns).

    `per_class`: one SVD per label the client holds, the vectors stacked ([d, p x labels]); the
    stacked columns are not orthogonal to each other (angle measures that need a basis orthonormalise).
    No centring: the data matrix as it is, like PACFL.
    """
    x = client_inputs(fed, client)
    groups = [x]
    if per_class and fed.task == "classification":
        y = client_labels(fed, client)
        groups = [x[y == c] for c in np.unique(y)]
    blocks = []
    for g in groups:
        u, _, _ = np.linalg.svd(g.T, full_matrices=False)
        blocks.append(u[:, : min(p, u.shape[1])])
    return np.hstack(blocks)


def smallest_principal_angle(a: np.ndarray, b: np.ndarray) -> float:
    """The smallest principal angle between span(a) and span(b), in degrees (scipy's subspace_angles)."""
    return float(np.degrees(subspace_angles(a, b).min()))


def smallest_basis_angle(a: np.ndarray, b: np.ndarray) -> float:
    """The smallest angle between a basis vector of `a` and one of `b` (arccos of their signed dot product),
    in degrees: the measure of the PACFL authors' code. It is at least the smallest principal angle."""
    return float(np.degrees(np.arccos(np.clip(a.T @ b, -1.0, 1.0)).min()))


ANGLE_MEASURES = {"principal": smallest_principal_angle, "basis-pairs": smallest_basis_angle}


def angle_matrix(subspaces: list[np.ndarray], measure: str) -> np.ndarray:
    """Symmetric [n, n] matrix of angles (degrees) between the clients' subspaces; 0 on the diagonal."""
    fn = ANGLE_MEASURES[measure]
    n = len(subspaces)
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            out[i, j] = out[j, i] = fn(subspaces[i], subspaces[j])
    return out


def floats_of(arrays) -> torch.Tensor:
    """Float count of each array (what a client uploads), [n] int64."""
    return torch.tensor([int(np.asarray(a).size) for a in arrays], dtype=torch.int64)
