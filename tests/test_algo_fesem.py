"""FeSEM: runs, records are complete, assignment is the nearest centre in L2, same seed same records."""
from __future__ import annotations

import pytest
import torch

from cfl_core.algorithms.fesem import nearest_centre
from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment
from cfl_core.records import RoundRecord


BASE = dict(dataset="digits", partition="concept-shift", clusters=4, clients_per_cluster=5, algorithm="fesem",
            models=4, device="cpu")


def run(**changes):
    return list(Experiment(ExperimentConfig(**{**BASE, **changes})))


def test_nearest_centre_ties_go_to_the_lowest_index():
    centres = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 0.0]])
    trained = torch.tensor([[0.9, 0.0], [1.1, 0.0], [0.0, 0.1]])
    choice, distances = nearest_centre(trained, centres)
    assert choice.tolist() == [0, 1, 0]
    assert distances.shape == (3, 3) and distances[1, 1] == pytest.approx(0.9)


@pytest.mark.parametrize("init", ["different", "same"])
def test_runs_and_records_are_complete(init, tmp_path):
    exp = Experiment(ExperimentConfig(**BASE, rounds=6, init=init, seed=1), out_dir=tmp_path / init)
    summary = exp.run()
    assert summary["status"] == "finished" and summary["rounds_completed"] == 6
    records = exp.records
    for r in records:
        assert r.phase == "clustering" and r.loss_matrix is None
        assert all(0 <= a < 4 for a in r.assignments)
        assert all(v is not None for v in r.client_accuracy) and r.accuracy is not None
        assert r.ari is not None and r.nmi is not None and 1 <= r.models_in_use <= 4
        assert r.bytes_down > 0 and r.bytes_up > 0
        distances = r.extras["l2_distances"]
        assert len(distances) == 20 and all(len(row) == 4 for row in distances)
        # the assignment recorded is the nearest centre of the round's trained model
        assert r.assignments == [min(range(4), key=row.__getitem__) for row in distances]
        assert sum(r.extras["centre_sizes"]) == 20
    if init == "same":  # every distance ties: everyone joins centre 0 and stays (the collapse)
        assert all(set(r.assignments) == {0} for r in records[1:])
    lines = (tmp_path / init / "rounds.jsonl").read_text().splitlines()
    assert len(lines) == 6 and RoundRecord.from_dict(__import__("json").loads(lines[-1])).extras["centre_sizes"]


def test_first_assignment_by_distance_and_newcomers():
    records = run(rounds=4, seed=0, options={"first_assignment": "distance"}, newcomer_share=0.2, newcomer_round=2)
    assert all(a >= 0 or a == -1 for a in records[0].assignments)
    newcomers = records[2].extras["newcomers"]
    assert len(newcomers) == 4 and all(records[2].assignments[c] >= 0 for c in newcomers)
    assert records[2].bytes_down > records[3].bytes_down  # the newcomers' probe training is paid for


def test_options_are_validated():
    with pytest.raises(ConfigError, match="options.first_assignment"):
        ExperimentConfig(**BASE, options={"first_assignment": "kmeans"}).validate()
    with pytest.raises(ConfigError, match="aggregation"):
        ExperimentConfig(**BASE, aggregation="gradient").validate()


def test_same_seed_same_records():
    a, b = run(rounds=4, seed=2, participation=0.6), run(rounds=4, seed=2, participation=0.6)
    for x, y in zip(a, b):
        assert (x.assignments, x.client_accuracy, x.extras) == (y.assignments, y.client_accuracy, y.extras)
