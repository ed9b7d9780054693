"""The dashboard's views of k-FED, PACFL and FedPAC (how each sees the clients), and "n/a" for ARI where an
algorithm forms no clusters — from the records of real small runs."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from cfl_core.algorithms import ALGORITHMS
from cfl_core.config import ExperimentConfig
from cfl_core.experiment import Experiment
from cfl_ui.views import algorithm_views as AV
from cfl_ui.views.run_charts import ari_note

SMALL = dict(dataset="digits", clusters=3, clients_per_cluster=3, samples_per_client=30, rounds=2, device="cpu",
             local_epochs=1)


def _records(**changes):
    exp = Experiment(ExperimentConfig(**{**SMALL, **changes}))
    return list(exp)


def test_kfed_shows_clients_by_their_local_centres():
    records = _records(algorithm="kfed", models=3, partition="feature-skew")
    views = AV.embedding_views("kfed", records, 1)
    assert [v.title for v in views] == ["k-FED: clients by the k-means centres of their inputs"]
    points = sum(len(t.x) for t in views[0].figure.data if getattr(t, "x", None) is not None)
    assert points >= 9  # every client present at set-up is a point


def test_pacfl_shows_its_angle_matrix_with_blocks_for_rotations():
    records = _records(algorithm="pacfl", models=3, partition="feature-skew")
    views = AV.embedding_views("pacfl", records, None)
    assert views and views[0].title.startswith("PACFL: angles")
    heat = views[0].figure.data[0]
    assert isinstance(heat, go.Heatmap) and np.asarray(heat.z).shape == (9, 9)
    z = np.asarray(heat.z)  # ordered by true cluster: the 3x3 diagonal blocks are the small angles
    inside = np.mean([z[i, j] for i in range(9) for j in range(9) if i // 3 == j // 3 and i != j])
    across = np.mean([z[i, j] for i in range(9) for j in range(9) if i // 3 != j // 3])
    assert inside < across


def test_fedpac_shows_whose_heads_each_client_combines():
    records = _records(algorithm="fedpac", partition="concept-shift")
    views = AV.embedding_views("fedpac", records, 1)
    assert views[0].title.startswith("FedPAC: whose heads")
    z = np.asarray(views[0].figure.data[0].z)
    assert z.shape == (9, 9) and np.allclose(z.sum(1), 1.0, atol=1e-3)


@pytest.mark.parametrize("name", [n for n, cls in ALGORITHMS.items() if not cls.has_clusters])
def test_algorithms_without_clusters_say_ari_does_not_apply(name):
    records = _records(algorithm=name, partition="concept-shift")
    assert ari_note(records) and "personalised" in ari_note(records)
    AV.embedding_views(name, records, None)  # never fails, whatever the algorithm recorded
    AV.extra_views(name, records, None)


def test_clustered_algorithms_keep_their_ari():
    assert ari_note(_records(algorithm="fedavg", partition="concept-shift")) is None
