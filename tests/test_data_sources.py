"""Bundled and synthetic sources, the registry, static info and caching."""
import numpy as np
import pytest
import torch

from cfl_core.data import SOURCES, dataset_info, load_dataset, source_status
from cfl_core.data import registry
from cfl_core.data.synthetic import LINEAR_DIM, draw_thetas
from cfl_core.errors import ConfigError


def test_source_names():
    assert set(SOURCES) == {"digits", "fashion-mnist", "mnist", "cifar10", "synthetic-linear", "synthetic-blobs"}


def test_digits_pools():
    ds = load_dataset("digits")
    assert ds.x_train.shape[1:] == (1, 8, 8) and ds.x_train.dtype == torch.float32
    assert float(ds.x_train.min()) == 0.0 and float(ds.x_train.max()) == 1.0
    assert ds.y_train.dtype == torch.int64
    assert len(ds.x_train) + len(ds.x_test) == 1797
    assert 0.6 < len(ds.x_train) / 1797 < 0.8
    # stratified: every class split in the same proportion
    train = np.bincount(ds.y_train.numpy(), minlength=10)
    test = np.bincount(ds.y_test.numpy(), minlength=10)
    assert np.all(np.abs(test / (train + test) - 0.25) < 0.01)


def test_digits_split_does_not_depend_on_the_seed():
    a, b = load_dataset("digits", seed=0), load_dataset("digits", seed=7)
    assert torch.equal(a.x_test, b.x_test)


def test_static_info_matches_loaded_info():
    for name in ("digits", "synthetic-linear", "synthetic-blobs"):
        assert load_dataset(name).info == dataset_info(name)


def test_dataset_info_loads_nothing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("dataset_info must not load data")

    monkeypatch.setattr(registry, "_load_cached", refuse)
    for name in SOURCES:
        info = dataset_info(name)
        assert info.name == name and info.n_train > 0 and info.n_test > 0
    assert dataset_info("mnist").input_shape == (1, 28, 28)
    assert dataset_info("cifar10").input_shape == (3, 32, 32)
    assert dataset_info("synthetic-linear").num_classes == 0


def test_loads_are_cached_and_seeded():
    assert load_dataset("digits") is load_dataset("digits")
    assert load_dataset("synthetic-blobs", seed=1) is load_dataset("synthetic-blobs", seed=1)
    a, b = load_dataset("synthetic-linear", seed=1), load_dataset("synthetic-linear", seed=2)
    assert not torch.equal(a.x_train, b.x_train)


def test_unknown_name_and_bad_seed():
    with pytest.raises(ConfigError) as caught:
        load_dataset("imagenet")
    assert caught.value.parameter == "dataset" and "imagenet" in str(caught.value) and "digits" in str(caught.value)
    with pytest.raises(ConfigError, match="dataset='nope'"):
        dataset_info("nope")
    with pytest.raises(ConfigError, match="seed=-1"):
        load_dataset("digits", seed=-1)


def test_synthetic_linear_pools():
    ds = load_dataset("synthetic-linear")
    assert ds.info.task == "regression" and ds.info.num_classes == 0
    assert ds.x_train.shape == (ds.info.n_train, LINEAR_DIM)
    assert torch.count_nonzero(ds.y_train) == 0  # targets come from the partition
    assert abs(float(ds.x_train.std()) - 1.0) < 0.05


def test_thetas_are_separated_and_impossible_requests_refused():
    thetas = draw_thetas(8, 10, 1.0, seed=3)
    d = np.linalg.norm(thetas[:, None] - thetas[None], axis=2)
    assert d[~np.eye(8, dtype=bool)].min() >= 1.0
    np.testing.assert_array_equal(thetas, draw_thetas(8, 10, 1.0, seed=3))
    with pytest.raises(ConfigError, match="clusters=5"):
        draw_thetas(5, 2, 50.0, seed=0)


def test_blobs_are_small_and_separable():
    ds = load_dataset("synthetic-blobs")
    assert ds.info.task == "classification" and ds.info.num_classes == 10
    centres = torch.stack([ds.x_train[ds.y_train == c].mean(0) for c in range(10)])
    nearest = torch.cdist(ds.x_test, centres).argmin(1)
    assert (nearest == ds.y_test).float().mean() > 0.95


def test_source_status_covers_every_source():
    statuses = source_status()
    assert [s.name for s in statuses] == list(SOURCES)
    for s in statuses:
        assert s.description
        assert (s.how_to_get == "") == s.available
        assert (s.location is not None) == s.available
    bundled = {s.name: s for s in statuses}
    assert all(bundled[n].available for n in ("digits", "synthetic-linear", "synthetic-blobs"))
