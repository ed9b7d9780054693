"""Unsupervised runs: an autoencoder trained on the inputs only; records report reconstruction loss, ARI still
measures the clustering. The product's signature on it: CLoVE recovers rotated-digit clusters from identical
initial models while IFCA, from the same models, collapses."""
from __future__ import annotations

import pytest

from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment, Setup


# The autoencoder does not learn with the supervised defaults (SGD, lr 0.1): Adam with lr 0.01 does.
# CLoVE clusters square-root loss vectors (the paper's SLV) and waits 5 unchanged rounds before freezing.
BASE = dict(dataset="digits", partition="feature-skew", clusters=4, clients_per_cluster=5, unsupervised=True,
            optimizer="adam", lr=0.01, models=4, init="same", rounds=15, device="cpu")
CLOVE_OPTIONS = {"sqrt_losses": True, "stable_rounds": 5}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clove_recovers_the_clusters_where_same_init_ifca_collapses(seed):
    clove_cfg = ExperimentConfig(**BASE, algorithm="clove", seed=seed, options=CLOVE_OPTIONS)
    setup = Setup.build(clove_cfg)
    clove = Experiment(clove_cfg, setup=setup)
    ifca = Experiment(ExperimentConfig(**BASE, algorithm="ifca", seed=seed), setup=setup)
    assert clove.federation is ifca.federation  # identical clients
    assert (clove.algorithm.models == ifca.algorithm.models).all()  # identical initial models, all equal
    clove_records, ifca_records = list(clove), list(ifca)
    assert clove_records[-1].ari == pytest.approx(1.0)
    assert ifca_records[-1].models_in_use == 1 and ifca_records[-1].ari == pytest.approx(0.0)
    assert clove_records[-1].loss < ifca_records[-1].loss  # specialised models reconstruct better
    for r in clove_records + ifca_records:
        assert r.accuracy is None and r.weighted_accuracy is None and set(r.client_accuracy) == {None}
        assert r.loss is not None and all(v is not None for v in r.client_loss)
    assert clove_records[-1].loss < clove_records[0].loss
    assert clove.meta()["task"] == "reconstruction"


@pytest.mark.parametrize("algorithm", ["fedavg", "flexcfl", "cfl", "fesem"])
def test_other_algorithms_run_without_labels(algorithm):
    cfg = ExperimentConfig(**{**BASE, "init": "different", "rounds": 4, "algorithm": algorithm,
                              "models": None if algorithm in ("fedavg", "cfl") else 4})
    exp = Experiment(cfg)
    records = list(exp)
    assert records[-1].loss < records[0].loss and records[-1].accuracy is None
    assert records[-1].ari is not None
    if algorithm == "flexcfl":  # no labels, so no label-distribution migration
        assert "migration_note" in records[0].extras and not exp.algorithm.migrates


def test_labels_are_never_read_by_the_autoencoder():
    cfg = ExperimentConfig(**{**BASE, "init": "different", "rounds": 2, "algorithm": "fedavg"})
    a = Experiment(cfg)
    b = Experiment(cfg)
    b.federation.y_train.random_(0, 10)  # scramble every label
    ra, rb = list(a), list(b)
    assert [r.client_loss for r in ra] == [r.client_loss for r in rb]


def test_unsupervised_needs_image_data():
    with pytest.raises(ConfigError, match="unsupervised"):
        ExperimentConfig(dataset="synthetic-blobs", partition="label-skew-3", unsupervised=True).validate()


def test_unsupervised_runs_only_with_the_autoencoder():
    from cfl_core.config import ExperimentConfig
    from cfl_core.errors import ConfigError

    with pytest.raises(ConfigError, match="model=.mlp. is not allowed: autoencoder"):
        ExperimentConfig(unsupervised=True, model="mlp").validate()
    with pytest.raises(ConfigError, match="set unsupervised to true"):
        ExperimentConfig(unsupervised=False, model="autoencoder").validate()
    ExperimentConfig(unsupervised=True, model="autoencoder", models=4).validate()
    ExperimentConfig(unsupervised=True, models=4).validate()
