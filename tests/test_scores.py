"""cfl_core.scores: the ARI and NMI every round records, against scikit-learn's definitions."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from cfl_core.scores import adjusted_rand, normalized_mutual_info


def labelings():
    rng = np.random.default_rng(7)
    for trial in range(1500):
        n = int(rng.integers(2, 80))
        truth = rng.integers(0, int(rng.integers(1, 9)), n) * int(rng.choice([1, 5, -3]))
        labels = rng.integers(-1, int(rng.integers(1, 9)), n)  # -1: a client not placed
        if trial % 6 == 0:
            labels = truth.copy()  # perfect agreement
        elif trial % 6 == 1:
            labels = 100 - truth  # the same partition under other names
        yield truth, labels


def test_both_scores_equal_scikit_learns_on_random_labelings():
    compared = 0
    for truth, labels in labelings():
        assert adjusted_rand(truth, labels) == adjusted_rand_score(truth, labels), (truth, labels)
        assert normalized_mutual_info(truth, labels) == normalized_mutual_info_score(truth, labels), (truth, labels)
        compared += 1
    assert compared == 1500


@pytest.mark.parametrize("truth, labels", [
    ([0, 0, 1, 1], [0, 0, 1, 1]),        # identical
    ([0, 0, 1, 1], [5, 5, 2, 2]),        # renamed
    ([0, 0, 0, 0], [0, 0, 0, 0]),        # neither splits
    ([0, 0, 0, 0], [0, 1, 2, 3]),        # only the labels split
    ([0, 1, 2, 3], [0, 0, 0, 0]),        # only the truth splits
    ([0, 1, 2, 3], [3, 2, 1, 0]),        # every client alone, both
    ([0, 0, 1, 1], [0, 1, 0, 1]),        # crossed: below chance
    ([0, 1], [0, 0]),
])
def test_edge_cases_agree_with_scikit_learn(truth, labels):
    assert adjusted_rand(truth, labels) == adjusted_rand_score(truth, labels)
    assert normalized_mutual_info(truth, labels) == normalized_mutual_info_score(truth, labels)


def test_known_values():
    assert adjusted_rand([0, 0, 1, 1], [1, 1, 0, 0]) == 1.0
    assert normalized_mutual_info([0, 0, 1, 1], [1, 1, 0, 0]) == pytest.approx(1.0)
    assert adjusted_rand([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(-0.5)
    assert normalized_mutual_info([0, 0, 1, 1], [0, 1, 0, 1]) == 0.0


def test_many_distinct_labels_need_no_dense_table():
    # 20,000 clients each alone in truth and in labels: a dense table would hold 4e8 cells
    ids = np.arange(20_000)
    assert adjusted_rand(ids, ids[::-1]) == 1.0
    assert normalized_mutual_info(ids, ids[::-1]) == pytest.approx(1.0)


def test_different_lengths_are_refused():
    with pytest.raises(ValueError, match="differ in length"):
        adjusted_rand([0, 1, 2], [0, 1])
