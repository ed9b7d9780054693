"""scikit-learn's bundled 8x8 digits: the instant default, no download."""
from __future__ import annotations

import numpy as np
import torch

from .base import CLASSIFICATION, Dataset, DatasetInfo, DataSource

# The split never depends on a run's seed, so the pools are the same for every run.
SPLIT_SEED = 20240601
# A quarter of each class goes to the test pool. A 2/3 split leaves 1198 training
# samples, two short of the default 4 clusters x 5 clients x 60; 3/4 lets the
# defaults work for iid, feature-skew, concept-shift and label-skew-3.
TEST_FRACTION = 0.25
# Samples per class in load_digits (fixed by the bundled file).
CLASS_SIZES = (178, 182, 177, 183, 181, 182, 181, 179, 174, 180)


def _test_sizes() -> list[int]:
    return [int(n * TEST_FRACTION + 0.5) for n in CLASS_SIZES]


STANDARD_INFO = DatasetInfo(
    "digits", CLASSIFICATION, (1, 8, 8), 10,
    sum(CLASS_SIZES) - sum(_test_sizes()), sum(_test_sizes()),
    tuple(n - t for n, t in zip(CLASS_SIZES, _test_sizes())), tuple(_test_sizes()),
)


def load() -> Dataset:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = bunch.images.astype(np.float32) / 16.0  # pixel values are 0..16
    y = bunch.target.astype(np.int64)
    counts = np.bincount(y, minlength=10)
    assert tuple(int(c) for c in counts) == CLASS_SIZES, "scikit-learn's digits changed"
    # Stratified split by hand (not train_test_split) so it cannot change with sklearn versions.
    rng = np.random.default_rng(SPLIT_SEED)
    test_idx = []
    for c, n_test in enumerate(_test_sizes()):
        members = np.flatnonzero(y == c)
        test_idx.extend(rng.permutation(members)[:n_test].tolist())
    is_test = np.zeros(len(y), dtype=bool)
    is_test[test_idx] = True
    train, test = np.flatnonzero(~is_test), np.flatnonzero(is_test)

    def tensors(idx):
        return torch.from_numpy(x[idx]).unsqueeze(1), torch.from_numpy(y[idx])

    x_train, y_train = tensors(train)
    x_test, y_test = tensors(test)
    return Dataset(STANDARD_INFO, x_train, y_train, x_test, y_test)


SOURCE = DataSource(
    name="digits",
    description="scikit-learn's bundled 8x8 handwritten digits; instant, no download",
    info=STANDARD_INFO,
    load=lambda _key, _seed: load(),
    supports_unsupervised=True,
)
