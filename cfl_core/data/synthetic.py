"""Synthetic sources that need no files: a mixture of linear regressions (the
setting of CLoVE's theory) and Gaussian blobs for the fastest teaching demo."""
from __future__ import annotations

import math

import numpy as np
import torch

from ..errors import ConfigError
from .base import CLASSIFICATION, REGRESSION, Dataset, DatasetInfo, DataSource, LinearMixture

# synthetic-linear: y = x . theta_k + N(0, NOISE_SIGMA^2), x ~ N(0, I_DIM).
LINEAR_DIM = 10
LINEAR_NOISE_SIGMA = 0.1
LINEAR_MIN_SEPARATION = 1.0
LINEAR_N_TRAIN = 20000
LINEAR_N_TEST = 5000
THETA_DRAWS_PER_VECTOR = 1000

# synthetic-blobs: BLOB_CLASSES Gaussian blobs in the plane, centres on a circle.
BLOB_CLASSES = 10
BLOB_DIM = 2
BLOB_RADIUS = 5.0
BLOB_STD = 0.6
BLOB_TRAIN_PER_CLASS = 1000
BLOB_TEST_PER_CLASS = 200

LINEAR_INFO = DatasetInfo("synthetic-linear", REGRESSION, (LINEAR_DIM,), 0, LINEAR_N_TRAIN, LINEAR_N_TEST)
BLOBS_INFO = DatasetInfo(
    "synthetic-blobs", CLASSIFICATION, (BLOB_DIM,), BLOB_CLASSES,
    BLOB_CLASSES * BLOB_TRAIN_PER_CLASS, BLOB_CLASSES * BLOB_TEST_PER_CLASS,
    (BLOB_TRAIN_PER_CLASS,) * BLOB_CLASSES, (BLOB_TEST_PER_CLASS,) * BLOB_CLASSES,
)


def load_linear(seed: int) -> Dataset:
    """Input pools only; targets depend on the cluster, so a partition computes them."""
    rng = np.random.default_rng([seed, 1])
    x_train = rng.standard_normal((LINEAR_N_TRAIN, LINEAR_DIM)).astype(np.float32)
    x_test = rng.standard_normal((LINEAR_N_TEST, LINEAR_DIM)).astype(np.float32)
    return Dataset(
        LINEAR_INFO,
        torch.from_numpy(x_train), torch.zeros(LINEAR_N_TRAIN),
        torch.from_numpy(x_test), torch.zeros(LINEAR_N_TEST),
        extras={"noise_sigma": LINEAR_NOISE_SIGMA, "min_separation": LINEAR_MIN_SEPARATION, "seed": seed},
    )


def draw_thetas(k: int, dim: int, min_separation: float, seed: int) -> np.ndarray:
    """k parameter vectors ~ N(0, I/dim) (norm about 1), each at least `min_separation`
    from the others: a candidate too close to an accepted one is drawn again.
    ConfigError when no candidate fits, i.e. k vectors this far apart are out of reach."""
    rng = np.random.default_rng([seed, 2])
    accepted = np.zeros((0, dim))
    for _ in range(k):
        candidates = rng.standard_normal((THETA_DRAWS_PER_VECTOR, dim)) / math.sqrt(dim)
        # squared distances to every accepted vector, by the |a|^2 + |b|^2 - 2ab identity
        d2 = (candidates**2).sum(1)[:, None] + (accepted**2).sum(1)[None, :] - 2 * candidates @ accepted.T
        ok = np.flatnonzero((d2 >= min_separation**2).all(axis=1))
        if len(ok) == 0:
            raise ConfigError(
                "clusters", k,
                f"could place only {len(accepted)} parameter vectors at least {min_separation} apart "
                f"in {dim} dimensions; use at most {len(accepted)} clusters",
            )
        accepted = np.vstack([accepted, candidates[ok[0]]])
    return accepted


def blob_centres() -> np.ndarray:
    angles = 2 * np.pi * np.arange(BLOB_CLASSES) / BLOB_CLASSES
    return BLOB_RADIUS * np.stack([np.cos(angles), np.sin(angles)], axis=1)


def load_blobs(seed: int) -> Dataset:
    rng = np.random.default_rng([seed, 3])
    centres = blob_centres()

    def pool(per_class):
        y = np.repeat(np.arange(BLOB_CLASSES), per_class)
        x = centres[y] + BLOB_STD * rng.standard_normal((len(y), BLOB_DIM))
        return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(np.int64))

    x_train, y_train = pool(BLOB_TRAIN_PER_CLASS)
    x_test, y_test = pool(BLOB_TEST_PER_CLASS)
    return Dataset(BLOBS_INFO, x_train, y_train, x_test, y_test, extras={"seed": seed})


LINEAR = DataSource(
    name="synthetic-linear",
    description=(
        f"mixture of linear regressions, x ~ N(0, I_{LINEAR_DIM}), "
        f"noise sigma {LINEAR_NOISE_SIGMA}; the partition draws the cluster parameters"
    ),
    info=LINEAR_INFO,
    load=lambda _key, seed: load_linear(seed),
    seeded=True,
    linear_mixture=LinearMixture(noise_sigma=LINEAR_NOISE_SIGMA, min_separation=LINEAR_MIN_SEPARATION),
)
BLOBS = DataSource(
    name="synthetic-blobs",
    description=f"{BLOB_CLASSES} Gaussian blobs in {BLOB_DIM}-d; trains instantly",
    info=BLOBS_INFO,
    load=lambda _key, seed: load_blobs(seed),
    seeded=True,
)
