"""Every cluster structure: cluster ids, disjoint pools, label sets, transforms."""
import numpy as np
import pytest
import torch

from cfl_core.data import load_dataset
from cfl_core.partition import PARTITIONS, PartitionConfig, build_partition


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


def build(ds, **kw):
    config = PartitionConfig(dataset=ds.info.name, **kw)
    return build_partition(ds, config)


def labels_of(part, cluster):
    held = set()
    for c in part.clients:
        if c.cluster == cluster:
            held |= {i for i, n in enumerate(c.label_counts) if n}
    return held


def check_common(part, ds):
    cfg = part.config
    assert [c.id for c in part.clients] == list(range(cfg.clusters * cfg.clients_per_cluster))
    assert [c.cluster for c in part.clients] == [i // cfg.clients_per_cluster for i in range(len(part.clients))]
    all_train = np.concatenate([c.train_idx for c in part.clients])
    assert len(np.unique(all_train)) == len(all_train), "training samples shared between clients"
    assert all_train.max() < ds.info.n_train
    for c in part.clients:
        assert len(c.train_idx) == cfg.samples_per_client
        assert len(c.test_idx) == cfg.test_size
        assert c.test_idx.max() < ds.info.n_test


CASES = [
    ("label-skew-1", dict(clusters=5, clients_per_cluster=4, samples_per_client=50)),
    ("label-skew-2", dict(samples_per_client=40)),
    ("label-skew-3", {}),
    ("label-skew-4", dict(samples_per_client=30)),
    ("feature-skew", {}),
    ("concept-shift", {}),
    ("iid", {}),
]


@pytest.mark.parametrize("name, kw", CASES)
def test_common_properties(digits, name, kw):
    part = build(digits, partition=name, **kw)
    check_common(part, digits)


def test_every_partition_is_covered():
    assert {name for name, _ in CASES} | {"linear-mixture"} == set(PARTITIONS)


def test_label_skew_1_disjoint_groups(digits):
    part = build(digits, partition="label-skew-1", clusters=5, clients_per_cluster=4, samples_per_client=50)
    assert [labels_of(part, k) for k in range(5)] == [{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}]
    materialized = part.materialize(digits)
    for client, data in zip(part.clients, materialized):
        assert set(data.y_train.tolist()) <= {2 * client.cluster, 2 * client.cluster + 1}
        assert set(data.y_test.tolist()) <= {2 * client.cluster, 2 * client.cluster + 1}


def test_label_skew_2_overlapping_sets(digits):
    part = build(digits, partition="label-skew-2", clusters=5, samples_per_client=40)
    sets = [labels_of(part, k) for k in range(5)]
    assert sets[0] == {0, 1, 2, 3} and sets[4] == {8, 9, 0, 1}
    for k in range(5):
        assert len(sets[k]) == 4 and len(sets[k] & sets[(k + 1) % 5]) == 2


def test_label_skew_3_misses_one_class(digits):
    part = build(digits, partition="label-skew-3")
    for k in range(4):
        assert labels_of(part, k) == set(range(10)) - {k}


def test_label_skew_4_dominant_class(digits):
    part = build(digits, partition="label-skew-4", samples_per_client=30)
    for k in range(4):
        totals = sum(np.array(c.label_counts) for c in part.clients if c.cluster == k)
        assert int(np.argmax(totals)) == k
        assert abs(totals[k] / totals.sum() - 2 / 3) < 0.02
        others = np.delete(totals, k)
        assert others.max() - others.min() <= 2  # the rest uniform


def test_feature_skew_rotates_train_and_test(digits):
    part = build(digits, partition="feature-skew")
    assert [part.clients[5 * k].transform for k in range(4)] == [{"rotation": a} for a in (0, 90, 180, 270)]
    for client, data in zip(part.clients, part.materialize(digits)):
        quarter_turns = client.cluster
        for x, pool, idx in [(data.x_train, digits.x_train, client.train_idx),
                             (data.x_test, digits.x_test, client.test_idx)]:
            expected = torch.rot90(pool[torch.from_numpy(idx)], k=quarter_turns, dims=(-2, -1))
            assert torch.equal(x, expected)
        assert torch.equal(data.y_train, digits.y_train[torch.from_numpy(client.train_idx)])
    assert not torch.equal(part.materialize(digits)[5].x_train, digits.x_train[torch.from_numpy(part.clients[5].train_idx)])


def test_feature_skew_uneven_angles_use_interpolation(digits):
    part = build(digits, partition="feature-skew", clusters=3, clients_per_cluster=2)
    assert [part.clients[2 * k].transform["rotation"] for k in range(3)] == [0, 120, 240]
    data = part.materialize(digits)
    source = digits.x_train[torch.from_numpy(part.clients[2].train_idx)]
    assert data[2].x_train.shape == source.shape and not torch.equal(data[2].x_train, source)
    assert float(data[2].x_train.min()) >= 0 and float(data[2].x_train.max()) <= 1 + 1e-6
    assert torch.equal(data[0].x_train, digits.x_train[torch.from_numpy(part.clients[0].train_idx)])


def test_concept_shift_maps_train_and_test_alike(digits):
    part = build(digits, partition="concept-shift", seed=5)
    maps = [part.clients[5 * k].transform["label_map"] for k in range(4)]
    assert maps[0] == list(range(10))
    assert len({tuple(m) for m in maps}) == 4
    for m in maps[1:]:
        moved = [i for i in range(10) if m[i] != i]
        assert len(moved) == 4 and all(m[m[i]] == i for i in range(10))  # two swaps
    for client, data in zip(part.clients, part.materialize(digits)):
        m = torch.tensor(client.transform["label_map"])
        assert torch.equal(data.y_train, m[digits.y_train[torch.from_numpy(client.train_idx)]])
        assert torch.equal(data.y_test, m[digits.y_test[torch.from_numpy(client.test_idx)]])
        assert torch.equal(data.x_train, digits.x_train[torch.from_numpy(client.train_idx)])
    assert build(digits, partition="concept-shift", seed=5).clients[5].transform["label_map"] == maps[1]


def test_concept_shift_on_vector_source():
    blobs = load_dataset("synthetic-blobs")
    part = build(blobs, partition="concept-shift", clusters=3, clients_per_cluster=2)
    assert part.materialize(blobs)[4].y_train.dtype == torch.int64


def test_iid_control(digits):
    part = build(digits, partition="iid")
    assert all(c.transform == {} for c in part.clients)
    assert [labels_of(part, k) for k in range(4)] == [set(range(10))] * 4


def test_linear_mixture_targets_and_truth():
    ds = load_dataset("synthetic-linear")
    part = build(ds, partition="linear-mixture", clusters=3, clients_per_cluster=2, samples_per_client=200)
    check_common(part, ds)
    thetas = np.array(part.truth["theta"])
    assert thetas.shape == (3, ds.info.input_shape[0])
    assert all(c.transform == {"theta": c.cluster} for c in part.clients)
    assert part.to_json()["clients"][0]["label_counts"] == []
    sigma = part.truth["noise_sigma"]
    for client, data in zip(part.clients, part.materialize(ds)):
        assert data.y_train.dtype == torch.float32 and data.y_train.shape == (200,)
        residual = data.y_train.double() - data.x_train.double() @ torch.from_numpy(thetas[client.cluster])
        assert abs(float(residual.std()) - sigma) < 0.3 * sigma
        assert abs(float(residual.mean())) < 0.05
        assert torch.equal(data.x_train, ds.x_train[torch.from_numpy(client.train_idx)])


def test_iid_on_synthetic_linear_is_one_regression():
    ds = load_dataset("synthetic-linear")
    part = build(ds, partition="iid", clusters=3, clients_per_cluster=2)
    assert len(part.truth["theta"]) == 3  # one row per cluster, all the same
    assert part.truth["theta"][0] == part.truth["theta"][1] == part.truth["theta"][2]
    assert all(c.transform == {"theta": 0} for c in part.clients)


def test_materialize_never_touches_the_pool(digits):
    before = digits.x_train.clone(), digits.y_train.clone()
    build(digits, partition="concept-shift").materialize(digits)
    build(digits, partition="feature-skew").materialize(digits)
    assert torch.equal(before[0], digits.x_train) and torch.equal(before[1], digits.y_train)
