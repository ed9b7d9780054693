"""The FEMNIST (LEAF JSON) and AG News (CSV) readers on small files written here, the natural federation
(one client per writer) with and without imposed clusters, and the CLI's word on where they are looked for."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch

from cfl_core.cli import main
from cfl_core.config import ExperimentConfig
from cfl_core.data import data_source, download_source, load_dataset
from cfl_core.data.bad_file import BadDataFile
from cfl_core.errors import ConfigError, DataUnavailable
from cfl_core.experiment import Experiment
from cfl_core.partition import PartitionConfig, build_partition


def _writer(rng, label_bias: int, n: int):
    """Strokes in the upper-left quarter (so a rotation moves them), a class's own pixel, a little noise."""
    y = (rng.integers(0, 5, n) + label_bias) % 62
    x = rng.random((n, 28, 28)) * 0.1
    x[:, 2:12, 3:5] += 0.8 * rng.random((n, 1, 1))
    x[:, 2:4, 3:13] += 0.8 * rng.random((n, 1, 1))
    x = x.reshape(n, 784)
    x[np.arange(n), 400 + y] = 1.0  # each class lights its own pixel: learnable
    return {"x": np.clip(x, 0, 1).round(3).tolist(), "y": y.tolist()}


def write_leaf(root, writers=12, train=24, test=8, split=True, seed=0):
    """A LEAF data folder: train/ and test/ (or all_data/ only) of two JSON files each."""
    rng = np.random.default_rng(seed)
    users = [f"f{i:04d}_{i % 7:02d}" for i in range(writers)]
    parts = {"train": {}, "test": {}}
    for i, u in enumerate(users):
        parts["train"][u] = _writer(rng, i, train)
        parts["test"][u] = _writer(rng, i, test)
    folders = {"train": parts["train"], "test": parts["test"]} if split else {"all_data": {
        u: {"x": parts["train"][u]["x"] + parts["test"][u]["x"], "y": parts["train"][u]["y"] + parts["test"][u]["y"]}
        for u in users}}
    for folder, data in folders.items():
        (root / folder).mkdir(parents=True)
        names = list(data)
        for k, chunk in enumerate((names[: writers // 2], names[writers // 2 :])):
            doc = {"users": chunk, "num_samples": [len(data[u]["y"]) for u in chunk],
                   "user_data": {u: data[u] for u in chunk}}
            (root / folder / f"all_data_{k}_niid_0_keep_0_{folder}_9.json").write_text(json.dumps(doc))
    return users


@pytest.fixture
def femnist_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CFL_DATA_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    write_leaf(tmp_path / "femnist")
    return tmp_path


def test_leaf_json_loads_every_writer_with_its_own_samples(femnist_dir):
    ds = load_dataset("femnist", data_dir=str(femnist_dir))
    assert ds.info.natural_clients == 12 and ds.info.num_classes == 62 and ds.info.input_shape == (1, 28, 28)
    assert (ds.info.n_train, ds.info.n_test) == (12 * 24, 12 * 8)
    assert ds.x_train.shape == (288, 1, 28, 28) and float(ds.x_train.max()) <= 1.0
    assert torch.equal(torch.bincount(ds.train_owner), torch.full((12,), 24))
    assert ds.owner_names[0] == "f0000_00"
    assert data_source("femnist").locate(str(femnist_dir)).folder == str(femnist_dir / "femnist")


def test_leaf_all_data_without_a_split_is_split_per_writer(tmp_path):
    write_leaf(tmp_path / "femnist", split=False)
    ds = load_dataset("femnist", data_dir=str(tmp_path))
    train, test = torch.bincount(ds.train_owner), torch.bincount(ds.test_owner)
    assert torch.equal(train + test, torch.full((12,), 32)) and torch.equal(train, torch.full((12,), 29))
    again = load_dataset.__wrapped__ if hasattr(load_dataset, "__wrapped__") else None
    assert again is None  # the split is fixed by the writer ids, not by a cache


def test_a_broken_leaf_file_is_named(tmp_path):
    write_leaf(tmp_path / "femnist")
    bad = sorted((tmp_path / "femnist" / "train").glob("*.json"))[0]
    doc = json.loads(bad.read_text())
    doc["user_data"][doc["users"][0]]["y"][0] = 99
    bad.write_text(json.dumps(doc))
    with pytest.raises(BadDataFile, match="labels must be 0..61"):
        data_source("femnist").load(data_source("femnist").locate(str(tmp_path)).key, 0)


def test_natural_clients_are_writers_and_without_imposed_clusters_ari_is_not_applicable(femnist_dir):
    cfg = ExperimentConfig(dataset="femnist", partition="iid", within="natural", clusters=2, clients_per_cluster=3,
                           samples_per_client=20, algorithm="fedavg", rounds=2, device="cpu", model="mlp")
    exp = Experiment(cfg)
    part = exp.setup_data.partition
    assert len(set(part.writers)) == 6 and not part.cluster_truth
    ds = exp.setup_data.dataset
    for spec, writer in zip(part.clients, part.writers):
        w = ds.owner_names.index(writer)
        assert set(ds.train_owner[spec.train_idx].tolist()) == {w} and len(spec.train_idx) == 20
        assert set(ds.test_owner[spec.test_idx].tolist()) == {w} and len(spec.test_idx) == 8
    record = exp.step()
    assert record.ari is None and record.extras["ari_applicable"] is False
    assert part.to_json()["cluster_truth"] is False and part.to_json()["writers"] == part.writers


def test_imposed_rotation_on_natural_clients_gives_ari_a_truth(femnist_dir):
    cfg = ExperimentConfig(dataset="femnist", partition="feature-skew", within="natural", clusters=2,
                           clients_per_cluster=3, samples_per_client=20, algorithm="pacfl", models=2, rounds=1,
                           device="cpu", model="mlp")
    exp = Experiment(cfg)
    assert exp.setup_data.partition.cluster_truth
    record = exp.step()
    assert record.ari == pytest.approx(1.0)  # PACFL sees rotated writers


def test_natural_split_refusals(femnist_dir):
    base = dict(dataset="femnist", within="natural", clusters=2, clients_per_cluster=3, device="cpu")
    with pytest.raises(ConfigError, match="partition='label-skew-1'"):
        ExperimentConfig(**base, partition="label-skew-1").validate()
    with pytest.raises(ConfigError, match="quantity_skew"):
        ExperimentConfig(**base, partition="iid", quantity_skew=1.0).validate()
    with pytest.raises(ConfigError, match="within='natural'"):
        ExperimentConfig(dataset="digits", within="natural", partition="iid").validate()
    too_many = PartitionConfig(dataset="femnist", partition="iid", within="natural", clusters=2, clients_per_cluster=7)
    with pytest.raises(ConfigError, match="clients_per_cluster=7 .*at most 6 .*12 natural clients"):
        build_partition(load_dataset("femnist"), too_many)


def test_femnist_pools_serve_the_usual_partitions(femnist_dir):
    cfg = ExperimentConfig(dataset="femnist", partition="concept-shift", clusters=2, clients_per_cluster=2,
                           samples_per_client=20, algorithm="clove", models=2, rounds=1, device="cpu", model="mlp")
    assert Experiment(cfg).step().ari is not None


# -- AG News -----------------------------------------------------------------------------------------
def write_ag_news(folder, rows_per_class=30, test_per_class=10):
    folder.mkdir(parents=True)
    words = {1: "election minister war", 2: "match goal season", 3: "market shares profit", 4: "software chip space"}
    for name, n in (("train.csv", rows_per_class), ("test.csv", test_per_class)):
        with open(folder / name, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, quoting=csv.QUOTE_ALL)
            for i in range(n):
                for c in (1, 2, 3, 4):
                    w.writerow([str(c), f"{words[c].split()[i % 3]} news {i}", f"{words[c]} today\\nmore {i}"])


def test_ag_news_csv_becomes_hashed_ngrams(tmp_path, monkeypatch):
    monkeypatch.setattr("cfl_core.data.agnews.POOL_PER_CLASS", 20)
    write_ag_news(tmp_path / "ag-news")
    ds = data_source("ag-news").load(data_source("ag-news").locate(str(tmp_path)).key, 0)
    assert ds.info.input_shape == (1024,) and ds.info.num_classes == 4
    assert (ds.info.n_train, ds.info.n_test) == (80, 40)  # the pool cap per class; the whole test file
    assert ds.info.train_class_counts == (20, 20, 20, 20)
    assert torch.allclose(ds.x_train.norm(dim=1), torch.ones(80), atol=1e-5) and (ds.x_train >= 0).all()
    same = data_source("ag-news").load(str(tmp_path / "ag-news"), 0)
    assert torch.equal(ds.x_train, same.x_train)  # hashing: no vocabulary, the same vectors every time


def test_ag_news_runs_label_skews_and_concept_shift_but_not_feature_skew(tmp_path, monkeypatch):
    monkeypatch.setenv("CFL_DATA_DIR", str(tmp_path))
    write_ag_news(tmp_path / "ag-news", rows_per_class=40)
    for partition, clusters in (("label-skew-1", 2), ("concept-shift", 3), ("label-skew-3", 4)):
        cfg = ExperimentConfig(dataset="ag-news", partition=partition, clusters=clusters, clients_per_cluster=2,
                               samples_per_client=16, algorithm="ifca", models=clusters, rounds=2, device="cpu")
        records = list(Experiment(cfg))
        assert records[-1].accuracy is not None and records[-1].ari is not None
    with pytest.raises(ConfigError, match="partition='feature-skew'"):
        ExperimentConfig(dataset="ag-news", partition="feature-skew").validate()
    with pytest.raises(ConfigError, match="clusters=3"):
        ExperimentConfig(dataset="ag-news", partition="label-skew-1", clusters=3).validate()


def test_a_broken_csv_line_is_named(tmp_path):
    write_ag_news(tmp_path / "ag-news")
    with open(tmp_path / "ag-news" / "test.csv", "a", encoding="utf-8") as fh:
        fh.write('"7","title","text"\n')
    with pytest.raises(BadDataFile, match="line 41"):
        data_source("ag-news").load(str(tmp_path / "ag-news"), 0)


def test_datasets_command_says_where_to_get_them_and_never_downloads(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CFL_DATA_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["datasets", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert not rows["femnist"]["available"] and "preprocess.sh" in rows["femnist"]["how_to_get"]
    assert not rows["ag-news"]["available"] and "train.csv" in rows["ag-news"]["how_to_get"]
    for name in ("femnist", "ag-news"):
        with pytest.raises(DataUnavailable, match="no download"):
            download_source(name)
        assert main(["datasets", "--download", name]) == 2
    write_ag_news(tmp_path / "ag-news")
    assert main(["datasets", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["ag-news"]["available"] and rows["ag-news"]["location"] == str(tmp_path / "ag-news")
