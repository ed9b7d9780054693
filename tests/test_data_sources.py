"""Bundled and synthetic sources, the registry and its source records, static info and caching."""
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from cfl_core.config import ExperimentConfig
from cfl_core.data import (DATA_SOURCES, SOURCES, DataSource, Dataset, DatasetInfo, LinearMixture, Located,
                           SourceStatus, data_source, dataset_info, download_source, load_dataset, source_status)
from cfl_core.data import registry
from cfl_core.data.synthetic import LINEAR_DIM, draw_thetas
from cfl_core.errors import ConfigError, DataUnavailable
from cfl_core.experiment import Experiment
from cfl_core.partition.structures import check_structure, cluster_transforms


def test_source_names():
    assert set(SOURCES) == {"digits", "fashion-mnist", "mnist", "cifar10", "femnist", "ag-news", "synthetic-linear",
                            "synthetic-blobs"}


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


# -- the source records ------------------------------------------------------------------
def test_every_source_is_one_record_under_its_own_name():
    assert list(DATA_SOURCES) == list(SOURCES)
    for name, source in DATA_SOURCES.items():
        assert isinstance(source, DataSource) and source.name == name and data_source(name) is source
        assert source.info.name == name and dataset_info(name) is source.info and source.description
        # a file source says where it looks and what to do when its files are missing; a built-in one needs neither
        # (and has nothing to download; a file source downloads only where a public mirror exists)
        assert source.file_based == (source.locate is not None) == bool(source.how_to_get)
        assert source.download is None or source.file_based
        assert source.image_shape == (source.info.input_shape if len(source.info.input_shape) == 3 else None)
    assert [n for n, s in DATA_SOURCES.items() if s.file_based] == ["fashion-mnist", "mnist", "cifar10", "femnist",
                                                                    "ag-news"]
    assert [n for n, s in DATA_SOURCES.items() if s.download] == ["fashion-mnist", "mnist", "cifar10"]
    assert [n for n, s in DATA_SOURCES.items() if s.seeded] == ["synthetic-linear", "synthetic-blobs"]
    assert [n for n, s in DATA_SOURCES.items() if s.supports_unsupervised] == ["digits", "fashion-mnist", "mnist",
                                                                              "cifar10", "femnist"]
    assert [n for n, s in DATA_SOURCES.items() if s.linear_mixture] == ["synthetic-linear"]
    assert data_source("cifar10").image_shape == (3, 32, 32) and data_source("synthetic-blobs").image_shape is None
    with pytest.raises(ConfigError, match="dataset='nope'"):
        data_source("nope")


def _tiny_source(**traits) -> DataSource:
    """A new data set as a module would declare it: 3-d vectors in two classes, drawn from the seed."""
    info = DatasetInfo("tiny", "classification", (3,), 2, 40, 20, (20, 20), (10, 10))

    def load(_key, seed):
        gen = torch.Generator().manual_seed(seed)
        y_train, y_test = torch.arange(40) % 2, torch.arange(20) % 2
        x_train = torch.randn(40, 3, generator=gen) + 3 * y_train[:, None]
        x_test = torch.randn(20, 3, generator=gen) + 3 * y_test[:, None]
        return Dataset(info, x_train, y_train, x_test, y_test, extras={"seed": seed})

    return DataSource("tiny", "two tiny blobs", info, load, **traits)


def test_a_new_source_is_one_record_in_the_registry(monkeypatch):
    monkeypatch.setitem(DATA_SOURCES, "tiny", _tiny_source(seeded=True))
    registry._load_cached.cache_clear()
    try:
        assert dataset_info("tiny").n_train == 40
        a, b = load_dataset("tiny", seed=1), load_dataset("tiny", seed=2)
        assert a is load_dataset("tiny", seed=1) and not torch.equal(a.x_train, b.x_train)  # cached, seeded
        assert [s for s in source_status() if s.name == "tiny"] == [SourceStatus("tiny", True, "two tiny blobs", "",
                                                                                 "built in")]
        download_source("tiny")  # a built-in source has nothing to fetch
        monkeypatch.setitem(DATA_SOURCES, "tiny", _tiny_source())
        registry._load_cached.cache_clear()
        assert torch.equal(load_dataset("tiny", seed=1).x_train, load_dataset("tiny", seed=2).x_train)  # unseeded
    finally:
        registry._load_cached.cache_clear()


def test_a_file_source_is_located_loaded_and_explained_through_its_record(monkeypatch, tmp_path):
    calls = []

    def locate(data_dir):
        found = data_dir if data_dir and (Path(data_dir) / "tiny.bin").exists() else None
        return Located(found, found, [str(data_dir)])

    def download(data_dir):
        calls.append(data_dir)
        (Path(data_dir) / "tiny.bin").write_text("")

    base = _tiny_source()
    monkeypatch.setitem(DATA_SOURCES, "tiny", DataSource(
        "tiny", base.description, base.info, lambda key, seed: base.load(key, 0), locate=locate, download=download,
        how_to_get="put tiny.bin in the data folder"))
    registry._load_cached.cache_clear()
    try:
        status = [s for s in source_status(str(tmp_path)) if s.name == "tiny"][0]
        assert (status.available, status.how_to_get, status.location) == (False, "put tiny.bin in the data folder", None)
        with pytest.raises(DataUnavailable, match="put tiny.bin"):
            load_dataset("tiny", data_dir=str(tmp_path))
        assert load_dataset("tiny", data_dir=str(tmp_path), download=True).info.name == "tiny"
        assert calls == [str(tmp_path)]
        status = [s for s in source_status(str(tmp_path)) if s.name == "tiny"][0]
        assert (status.available, status.how_to_get, status.location) == (True, "", str(tmp_path))
    finally:
        registry._load_cached.cache_clear()


def test_validation_and_partitions_read_the_traits_not_the_names(monkeypatch):
    cfg = dict(dataset="digits", partition="feature-skew", unsupervised=True, model="autoencoder", device="cpu",
               models=4)
    ExperimentConfig(**cfg).validate()
    digits = data_source("digits")
    monkeypatch.setitem(DATA_SOURCES, "digits", dataclasses.replace(digits, supports_unsupervised=False))
    with pytest.raises(ConfigError, match="true only for image data sets"):
        ExperimentConfig(**cfg).validate()
    # linear-mixture follows the trait: refused on digits, and its message names the sources that have it
    with pytest.raises(ConfigError, match="linear-mixture needs dataset synthetic-linear"):
        check_structure("linear-mixture", 4, dataset_info("digits"))
    mixture = LinearMixture(noise_sigma=0.5, min_separation=0.2)
    monkeypatch.setitem(DATA_SOURCES, "digits", dataclasses.replace(digits, linear_mixture=mixture))
    check_structure("linear-mixture", 4, dataset_info("digits"))
    transforms, truth = cluster_transforms("linear-mixture", 4, dataset_info("digits"), seed=0)
    assert [t["theta"] for t in transforms] == [0, 1, 2, 3]
    assert (truth["noise_sigma"], truth["min_separation"]) == (0.5, 0.2)


def test_cfl_thresholds_come_from_the_source(monkeypatch):
    def cfl_params(**extra):
        config = ExperimentConfig(dataset="digits", partition="iid", clusters=2, clients_per_cluster=2,
                                  samples_per_client=20, algorithm="cfl", rounds=1, device="cpu", **extra)
        return next(iter(Experiment(config))).extras["cfl_params"]

    assert data_source("fashion-mnist").cfl_eps == {"cnn": (0.9, 1.9)}
    assert (cfl_params()["eps1"], cfl_params()["eps2"]) == (0.4, 0.7)  # the MLP's defaults on digits
    monkeypatch.setitem(DATA_SOURCES, "digits", dataclasses.replace(data_source("digits"), cfl_eps={"mlp": (0.25, 3.5)}))
    assert (cfl_params()["eps1"], cfl_params()["eps2"]) == (0.25, 3.5)
    assert (cfl_params(model="logreg")["eps1"], cfl_params(model="logreg")["eps2"]) == (0.4, 0.55)  # not named
