"""The four newer clustered-FL methods (FedSoft, FedRC, SR-FCA, CFL-GP): their rules on small runs and their maths
as pure functions."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cfl_core.algorithms.cflgp import match_to_previous, spectral_coordinates
from cfl_core.algorithms.fedrc import responsibilities
from cfl_core.algorithms.fedsoft import cluster_importance, importance_weights
from cfl_core.algorithms.srfca import correlation_clusters, symmetric, two_means_threshold
from cfl_core.config import ExperimentConfig
from cfl_core.engine.aggregate import trimmed_mean
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment

SMALL = dict(dataset="digits", samples_per_client=60, device="cpu")


def run(**changes):
    exp = Experiment(ExperimentConfig(**{**SMALL, **changes}))
    records = list(exp)
    return exp, records


# -- SR-FCA ------------------------------------------------------------------------------------------

def test_srfca_finds_the_rotations_without_being_told_how_many():
    _, records = run(algorithm="srfca", partition="feature-skew", clusters=4, clients_per_cluster=5, rounds=8,
                     options={"init_rounds": 3, "refine_every": 2})
    assert [r.phase for r in records[:3]] == ["init", "init", "clustering"]
    assert records[0].models_in_use == 20  # INIT: every client on a model of its own
    assert records[-1].ari == 1.0 and records[-1].models_in_use == 4
    assert records[2].extras["threshold"] > 0 and records[2].extras["clusters"] == 4
    assert any(r.extras.get("refine_step") for r in records)


def test_srfca_init_traffic_is_every_local_model_up_then_all_of_them_down():
    exp, records = run(algorithm="srfca", partition="feature-skew", clusters=2, clients_per_cluster=3, rounds=2,
                       options={"init_rounds": 2})
    mb = exp.spec.bytes_per_model
    assert (records[0].bytes_down, records[0].bytes_up) == (0, 0)  # local training alone
    # round 1 ends INIT: 6 local models up, all 6 down to each of the 6 clients, each sends its 6 losses
    assert records[1].bytes_up == 6 * mb + 6 * 6 * 4 and records[1].bytes_down == 6 * 6 * mb


def test_srfca_pure_parts():
    assert two_means_threshold(np.array([0.1, 0.12, 0.11, 2.0, 2.2, 1.9])) == pytest.approx((0.12 + 1.9) / 2)
    near = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]], dtype=bool)
    assert sorted(correlation_clusters(near, np.random.default_rng(0))) == [[0, 1], [2, 3]]
    loss = np.array([[0.1, 3.0], [0.2, 2.0], [4.0, 0.3]])  # [client, model]; model 0's clients 0-1, model 1's 2
    d = symmetric(loss, [[0, 1], [2]])
    assert d[0, 1] == d[1, 0] == pytest.approx((4.0 + 2.5) / 2) and d[0, 0] == pytest.approx(0.15)
    rows = torch.tensor([[0.0], [1.0], [2.0], [100.0]])
    assert float(trimmed_mean(rows, 0.25)) == 1.5 and float(trimmed_mean(rows, 0.0)) == 25.75
    with pytest.raises(ConfigError, match="threshold_quantile"):
        ExperimentConfig(**SMALL, algorithm="srfca", options={"threshold": 1.0, "threshold_quantile": 0.2}).validate()


# -- CFL-GP ------------------------------------------------------------------------------------------------

def test_cflgp_accumulated_update_profile_recovers_the_clusters_and_stops_clustering():
    _, records = run(algorithm="cflgp", partition="concept-shift", clusters=4, clients_per_cluster=5, models=4,
                     rounds=7, options={"period": 2, "stop_after": 5})
    assert [r.extras.get("criterion") for r in records] == [0, None, 1, None, 2, None, None]
    assert [r.phase for r in records] == ["clustering", "training"] * 3 + ["training"]
    assert all(r.ari == 1.0 for r in records[2:])
    coords = records[4].extras["profile_coordinates"]
    assert len(coords) == 20 and all(len(row) == 4 for row in coords)


def test_cflgp_pure_parts():
    # four clients, two directions: the coordinates put 0-1 and 2-3 apart
    g = torch.tensor([[1.0, 1.1, 0.0, 0.1], [0.0, 0.1, 1.0, 0.9], [0.5, 0.4, -0.5, -0.6]])
    c = spectral_coordinates(g, 2)
    assert np.linalg.norm(c[0] - c[1]) < 0.3 < np.linalg.norm(c[0] - c[2])
    u, s, vt = np.linalg.svd(g.double().numpy(), full_matrices=False)
    assert np.allclose(np.abs(c), np.abs((s[:2, None] * vt[:2]).T), atol=1e-9)  # the SVD's coordinates
    assert match_to_previous(np.array([1, 1, 0, 0]), np.array([0, 0, 1, 1]), 2).tolist() == [0, 0, 1, 1]


# -- FedSoft -----------------------------------------------------------------------------------------

def test_fedsoft_weights_sum_to_one_and_a_mixed_client_sits_between_the_clusters():
    cfg = ExperimentConfig(**SMALL, algorithm="fedsoft", partition="feature-skew", clusters=2, clients_per_cluster=4,
                           models=2, rounds=6)
    exp = Experiment(cfg)
    fed = exp.federation
    half = int(fed.n_train[0]) // 2
    other = 4  # a client of the other rotation: client 0 gets half of its data
    fed.x_train[0, half:int(fed.n_train[0])] = fed.x_train[other, half:int(fed.n_train[0])]
    fed.y_train[0, half:int(fed.n_train[0])] = fed.y_train[other, half:int(fed.n_train[0])]
    records = list(exp)
    weights = np.array(records[-1].extras["memberships"])
    assert np.allclose(weights.sum(1), 1.0, atol=1e-3)
    pure = np.delete(weights, 0, axis=0)
    assert (pure.max(1) > 0.8).all()  # every unmixed client belongs mostly to one cluster
    assert 0.3 < weights[0].min() and weights[0].max() < 0.7  # the mixed one sits between them
    truth = np.array(records[-1].true_clusters[1:])
    dominant = weights[1:].argmax(1)
    assert len(set(dominant[truth == 0])) == 1 and len(set(dominant[truth == 1])) == 1
    assert dominant[truth == 0][0] != dominant[truth == 1][0]


def test_fedsoft_importance_maths():
    losses = torch.tensor([[[0.1, 1.0], [0.2, 0.1], [0.3, 0.9], [9.0, 9.0]]])  # [1 client, 4 samples, 2 clusters]
    valid = torch.tensor([[True, True, True, False]])
    u = importance_weights(losses, valid, 1e-4, normalise=True)
    assert torch.allclose(u, torch.tensor([[2 / 3, 1 / 3]]))
    only = importance_weights(losses[:, :1], valid[:, :1], 0.01, normalise=False)  # cluster 1 wins nothing
    assert torch.allclose(only, torch.tensor([[1.0, 0.01]]))
    v = cluster_importance(torch.tensor([[1.0, 0.0], [0.5, 0.5]]), torch.tensor([10.0, 30.0]))
    assert torch.allclose(v, torch.tensor([[0.4, 0.6], [0.0, 1.0]]))


# -- FedRC -----------------------------------------------------------------------------------------------

def test_fedrc_score_ignores_label_shift_and_follows_concept_shift():
    """Two models whose predictions differ only by their clusters' label marginals (loss_k = b - log P_k(y): label
    shift only) get equal weight on every sample under FedRC's P(y|x)/P_k(y), while FedEM's P(y|x) alone pulls a
    client towards the model whose marginal matches its labels; a model with another P(y|x) (concept shift)
    loses the samples it gets wrong."""
    marginal = torch.tensor([[0.4, 0.4, 0.1, 0.1], [0.1, 0.1, 0.4, 0.4]])  # P_k(y) of two label-shifted clusters
    y = torch.tensor([0, 1, 0, 1, 2])  # a client holding mostly classes 0 and 1
    b = torch.tensor([0.3, 0.5, 0.2, 0.4, 0.6])
    log_label = torch.log(marginal[:, y].T)[None]  # [1, 5, K]
    losses = b[None, :, None] - log_label
    valid = torch.ones(1, 5, dtype=torch.bool)
    log_omega = torch.log(torch.full((1, 2), 0.5))
    robust = responsibilities(losses, valid, log_omega, log_label)
    fedem = responsibilities(losses, valid, log_omega, None)
    assert torch.allclose(robust, torch.full_like(robust, 0.5))  # the same concept: no pull either way
    assert float(fedem[0, :4, 0].min()) > 0.7 and float(fedem[0, 4, 1]) > 0.7  # FedEM follows the labels
    concept = losses.clone()
    concept[0, :2, 1] += 5.0  # model 1 holds another concept: it gets samples 0 and 1 wrong
    split = responsibilities(concept, valid, log_omega, log_label)
    assert float(split[0, :2, 0].min()) > 0.99 and torch.allclose(split[0, 2:], torch.full((3, 2), 0.5))


def test_fedrc_records_memberships_that_sum_to_one_and_give_the_clusters():
    _, records = run(algorithm="fedrc", partition="concept-shift", clusters=2, clients_per_cluster=3, models=2,
                     local_epochs=5, rounds=2, samples_per_client=40)
    weights = np.array(records[-1].extras["memberships"])
    assert np.allclose(weights.sum(1), 1.0, atol=1e-4)
    assert records[-1].assignments == weights.argmax(1).tolist()
    with pytest.raises(ConfigError, match="unsupervised"):
        ExperimentConfig(**SMALL, algorithm="fedrc", models=2, unsupervised=True, model="autoencoder").validate()


MIXED = dict(partition="concept-shift", clusters=2, clients_per_cluster=6, samples_per_client=50, within="pathological",
             num_classes_per_partition=5, local_epochs=5, models=4)


@pytest.mark.slow
def test_under_mixed_shifts_loss_vectors_split_what_fedrc_keeps_together():
    """Concept shift across the two clusters, label shift inside them (each client holds 5 of the 10 classes), K-hat
    = 4: CLoVE's loss vectors and FedEM's P(y|x) (FedRC without its label term) split each concept by label set;
    FedRC's P(y|x)/P_k(y) keeps each concept on one model."""
    _, clove = run(algorithm="clove", rounds=24, **MIXED)
    _, fedem = run(algorithm="fedrc", rounds=24, options={"label_term": False}, **MIXED)
    _, fedrc = run(algorithm="fedrc", rounds=24, **MIXED)
    for records in (clove, fedem):
        assert records[-1].models_in_use == 4 and records[-1].ari < 0.5
        truth = np.array(records[-1].true_clusters)
        labels = np.array(records[-1].assignments)
        assert not set(labels[truth == 0]) & set(labels[truth == 1])  # the split is inside the concepts
    assert fedrc[-1].ari == 1.0 and fedrc[-1].models_in_use == 2
