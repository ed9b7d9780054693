"""Label counts, within-cluster splits, quantity skew, test sets, determinism."""
import json

import numpy as np
import pytest

from cfl_core.data import load_dataset
from cfl_core.partition import PartitionConfig, build_partition
from cfl_core.partition.plan import client_sizes
from cfl_core.partition.rounding import fit_margins, largest_remainder, round_to_margins


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


def test_largest_remainder_adds_up():
    assert largest_remainder([1, 1, 1], 10).tolist() in ([4, 3, 3], [3, 4, 3], [3, 3, 4])
    assert largest_remainder([0.2, 0.8], 7).sum() == 7
    assert largest_remainder([1, 2], 0).tolist() == [0, 0]


def test_rounding_keeps_both_margins():
    rng = np.random.default_rng(0)
    shape = rng.dirichlet(np.full(6, 0.3), size=8)
    rows = np.full(8, 25)
    cols = largest_remainder(np.arange(1, 7), 200)
    fitted = fit_margins(shape, rows, cols)
    counts = round_to_margins(fitted, rows, cols, shape > 0)
    assert counts.min() >= 0
    assert counts.sum(1).tolist() == rows.tolist() and counts.sum(0).tolist() == cols.tolist()
    assert np.abs(counts - fitted).max() < 1.0 + 1e-9


def test_quantity_skew_sizes():
    rng = np.random.default_rng(0)
    assert client_sizes(5, 60, 0.0, rng).tolist() == [60] * 5
    sizes = client_sizes(10, 60, 1.5, rng)
    assert sizes.sum() == 600 and sizes.min() >= 1 and sizes.max() > 3 * sizes.min()


def test_quantity_skew_partition_keeps_the_mean(digits):
    part = build_partition(digits, PartitionConfig("digits", "iid", quantity_skew=1.0))
    sizes = [len(c.train_idx) for c in part.clients]
    assert len(set(sizes)) > 2 and sum(sizes) == 4 * 5 * 60
    for k in range(4):
        assert sum(sizes[5 * k:5 * k + 5]) == 300


def test_dirichlet_makes_clients_differ_but_keeps_the_cluster(digits):
    iid = build_partition(digits, PartitionConfig("digits", "label-skew-3"))
    skewed = build_partition(digits, PartitionConfig("digits", "label-skew-3", within="dirichlet", alpha=0.1))
    spread = [np.std(c.label_counts) for c in skewed.clients]
    assert np.mean(spread) > 2 * np.mean([np.std(c.label_counts) for c in iid.clients])
    for k in range(4):
        total = sum(np.array(c.label_counts) for c in skewed.clients if c.cluster == k)
        assert total[k] == 0  # the cluster still misses class k
    assert all(len(c.train_idx) == 60 for c in skewed.clients)


def test_pathological_gives_each_client_few_labels(digits):
    part = build_partition(digits, PartitionConfig("digits", "iid", within="pathological", num_classes_per_partition=2))
    for c in part.clients:
        assert sum(1 for n in c.label_counts if n) == 2


def test_pathological_keeps_label_skew_4_dominant_class(digits):
    part = build_partition(digits, PartitionConfig("digits", "label-skew-4", samples_per_client=30,
                                                   within="pathological", num_classes_per_partition=2))
    for c in part.clients:
        held = [i for i, n in enumerate(c.label_counts) if n]
        assert len(held) == 2 and c.cluster in held
    for k in range(4):
        total = sum(np.array(c.label_counts) for c in part.clients if c.cluster == k)
        assert abs(total[k] / total.sum() - 2 / 3) < 0.02


def test_test_sets_follow_training_labels(digits):
    part = build_partition(digits, PartitionConfig("digits", "label-skew-1", clusters=5, clients_per_cluster=4,
                                                   samples_per_client=50, within="dirichlet", alpha=0.3))
    data = part.materialize(digits)
    for c, d in zip(part.clients, data):
        train = np.bincount(d.y_train.numpy(), minlength=10)
        test = np.bincount(d.y_test.numpy(), minlength=10)
        assert set(np.flatnonzero(test)) <= set(np.flatnonzero(train))
        assert np.abs(test / test.sum() - train / train.sum()).max() < 0.05


def test_test_sets_disjoint_when_the_pool_suffices(digits):
    part = build_partition(digits, PartitionConfig("digits", "iid", test_samples_per_client=20))
    assert part.test_disjoint and part.to_json()["test_disjoint"] is True
    all_test = np.concatenate([c.test_idx for c in part.clients])
    assert len(np.unique(all_test)) == len(all_test)


def test_test_sets_may_overlap_when_the_pool_is_small(digits):
    part = build_partition(digits, PartitionConfig("digits", "iid", clients_per_cluster=10, samples_per_client=30,
                                                   test_samples_per_client=40))
    assert not part.test_disjoint
    for c in part.clients:
        assert len(c.test_idx) == 40 and len(np.unique(c.test_idx)) == 40  # no repeats inside a client


def test_same_seed_same_partition_other_seed_differs(digits):
    config = PartitionConfig("digits", "concept-shift", within="dirichlet", quantity_skew=0.5, seed=11)
    a = build_partition(digits, config)
    b = build_partition(digits, config)
    assert json.dumps(a.to_json(), sort_keys=True) == json.dumps(b.to_json(), sort_keys=True)
    assert all(np.array_equal(x.train_idx, y.train_idx) and np.array_equal(x.test_idx, y.test_idx)
               for x, y in zip(a.clients, b.clients))
    c = build_partition(digits, PartitionConfig("digits", "concept-shift", within="dirichlet", quantity_skew=0.5, seed=12))
    assert any(not np.array_equal(x.train_idx, y.train_idx) for x, y in zip(a.clients, c.clients))


def test_synthetic_linear_noise_is_deterministic():
    ds = load_dataset("synthetic-linear")
    config = PartitionConfig("synthetic-linear", "linear-mixture", clusters=2, clients_per_cluster=2)
    a = build_partition(ds, config).materialize(ds)
    b = build_partition(ds, config).materialize(ds)
    assert all(np.array_equal(x.y_train.numpy(), y.y_train.numpy()) for x, y in zip(a, b))


def test_to_json_fields(digits):
    part = build_partition(digits, PartitionConfig("digits", "feature-skew"))
    doc = part.to_json()
    assert doc["config"]["partition"] == "feature-skew" and doc["dataset"]["name"] == "digits"
    client = doc["clients"][7]
    assert set(client) == {"id", "cluster", "n_train", "n_test", "label_counts", "transform"}
    assert client == {"id": 7, "cluster": 1, "n_train": 60, "n_test": 30,
                      "label_counts": part.clients[7].label_counts, "transform": {"rotation": 90}}
    assert sum(client["label_counts"]) == 60
    json.dumps(doc)  # plain JSON types only
