"""k-FED and PACFL: their rules on small constructed cases, what they can and cannot see, their records and
traffic."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from cfl_core.algorithms.kfed import vote
from cfl_core.algorithms.pacfl import cluster_angles
from cfl_core.config import ExperimentConfig
from cfl_core.engine.federation import Federation
from cfl_core.engine.summaries import (angle_matrix, local_centres, smallest_basis_angle, smallest_principal_angle,
                                       top_subspace)
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment

SMALL = dict(dataset="digits", clusters=3, clients_per_cluster=4, samples_per_client=40, device="cpu", rounds=2)


def _fed(blocks, seed=0, n=30):
    """Clients whose inputs lie near one of a few directions in R^6: `blocks[i]` is client i's direction."""
    gen = torch.Generator().manual_seed(seed)
    clients = []
    for i, b in enumerate(blocks):
        base = torch.zeros(6)
        base[2 * b] = 1.0
        base[2 * b + 1] = 0.5
        x = base * torch.rand(n, 1, generator=gen) * 3 + 0.05 * torch.randn(n, 6, generator=gen)
        y = torch.randint(0, 3, (n,), generator=gen)
        clients.append(SimpleNamespace(x_train=x, y_train=y, x_test=x[:5], y_test=y[:5], cluster=b))
    return Federation.from_clients(clients, "classification", 3, torch.device("cpu"))


def test_vote_weights_centres_by_their_points_and_ties_go_to_the_lowest_cluster():
    assert vote(np.array([2, 0]), np.array([1, 5]), 3) == (0, [5, 0, 1])
    assert vote(np.array([2, 1]), np.array([4, 4]), 3)[0] == 1


def test_local_centres_are_k_means_of_the_clients_own_inputs():
    fed = _fed([0, 1])
    centres, sizes = local_centres(fed, 1, 2, seed=0)
    assert centres.shape == (2, 6) and sizes.sum() == 30
    assert abs(centres[:, 2:4]).max() > 0.5 and abs(centres[:, :2]).max() < 0.2  # client 1 lives on dims 2-3
    assert local_centres(fed, 1, 50, seed=0)[0].shape[0] == 30  # never more centres than points


def test_principal_angles_of_known_subspaces():
    a = np.array([[1.0], [0.0], [0.0]])
    b = np.array([[np.cos(np.radians(30))], [np.sin(np.radians(30))], [0.0]])
    assert smallest_principal_angle(a, b) == pytest.approx(30.0)
    assert smallest_basis_angle(a, b) == pytest.approx(30.0)
    # a 2-D subspace containing a: principal angle 0, but no basis vector of it is a itself
    plane = np.array([[1.0, 1.0], [1.0, -1.0], [0.0, 0.0]]) / np.sqrt(2)
    assert smallest_principal_angle(a, plane) == pytest.approx(0.0, abs=1e-6)
    assert smallest_basis_angle(a, plane) == pytest.approx(45.0)
    assert smallest_basis_angle(-a, a) == pytest.approx(180.0)  # the authors' measure is signed


def test_top_subspace_finds_each_clients_direction_and_per_class_stacks_one_svd_per_label():
    fed = _fed([0, 2])
    u = top_subspace(fed, 0, 1, per_class=False)
    assert u.shape == (6, 1) and abs(u[:2, 0]).sum() > 1.2
    assert top_subspace(fed, 0, 2, per_class=True).shape == (6, 2 * len(torch.unique(fed.y_train[0])))
    angles = angle_matrix([top_subspace(fed, c, 1, False) for c in range(2)], "principal")
    assert angles[0, 1] > 80 and angles[0, 0] == 0


def test_hierarchical_clustering_of_a_block_angle_matrix_by_count_and_by_threshold():
    angles = np.array([[0, 2, 40, 41], [2, 0, 42, 39], [40, 42, 0, 3], [41, 39, 3, 0]], dtype=float)
    assert cluster_angles(angles, "weighted", None, 2).tolist() == [0, 0, 1, 1]
    assert cluster_angles(angles, "average", 10.0, 99).tolist() == [0, 0, 1, 1]  # threshold: K chosen
    assert cluster_angles(angles, "single", 1.0, 99).tolist() == [0, 1, 2, 3]
    assert cluster_angles(angles, "complete", 50.0, 99).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("name", ["kfed", "pacfl"])
def test_rotated_inputs_are_found_but_swapped_labels_are_invisible(name):
    """Feature skew changes the inputs: found. Concept shift leaves them identical: chance."""
    found = Experiment(ExperimentConfig(**SMALL, algorithm=name, models=3, partition="feature-skew"))
    first = found.step()
    assert first.ari == pytest.approx(1.0)
    blind = Experiment(ExperimentConfig(**SMALL, algorithm=name, models=3, partition="concept-shift"))
    assert blind.step().ari < 0.5


def test_kfed_records_its_embedding_and_pays_for_the_centres_once():
    exp = Experiment(ExperimentConfig(**SMALL, algorithm="kfed", models=3, partition="feature-skew",
                                      options={"local_k": 2}))
    r0, r1 = exp.step(), exp.step()
    d, mb, n = 64, exp.spec.bytes_per_model, 12
    assert len(r0.extras["local_centres"]) == n and len(r0.extras["local_centres"][0]) == 2 * d
    assert [sum(v) for v in r0.extras["centre_votes"]] == [40] * n
    assert r0.bytes_up == n * (2 * d + 2) * 4 + n * mb and r0.bytes_down == n * mb
    assert (r1.bytes_up, r1.bytes_down) == (n * mb, n * mb)
    assert "local_centres" not in r1.extras


def test_pacfl_records_the_angle_matrix_and_chooses_k_by_threshold():
    exp = Experiment(ExperimentConfig(**SMALL, algorithm="pacfl", models=3, partition="feature-skew",
                                      options={"per_class": False, "p": 2}))
    r0 = exp.step()
    angles = np.array(r0.extras["angles"])
    assert angles.shape == (12, 12) and np.allclose(angles, angles.T) and np.all(np.diag(angles) == 0)
    truth = np.array(r0.true_clusters)
    same = truth[:, None] == truth[None, :]
    assert angles[same & ~np.eye(12, dtype=bool)].max() < angles[~same].min()  # blocks: the clusters
    assert r0.bytes_up == 12 * 64 * 2 * 4 + 12 * exp.spec.bytes_per_model
    chosen = Experiment(ExperimentConfig(**{**SMALL, "models": None}, algorithm="pacfl", partition="feature-skew",
                                         options={"per_class": False, "p": 2,
                                                  "threshold": float(angles[~same].min()) - 1e-3}))
    rec = chosen.step()
    assert rec.extras["clusters_found"] == 3 and rec.ari == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="models"):
        ExperimentConfig(**{**SMALL, "models": None}, algorithm="pacfl").validate()


@pytest.mark.parametrize("name", ["kfed", "pacfl"])
def test_newcomers_join_the_cluster_their_data_looks_like(name):
    exp = Experiment(ExperimentConfig(**{**SMALL, "rounds": 3}, algorithm=name, models=3, partition="feature-skew",
                                      newcomer_share=0.25, newcomer_round=1))
    records = list(exp)
    fresh = records[1].extras["newcomers"]
    assert fresh and records[1].ari == pytest.approx(1.0)
    assert all(records[1].assignments[c] >= 0 for c in fresh)
