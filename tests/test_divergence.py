"""A run whose training blows up stops with status `diverged` and a message naming the learning rate, keeping the
rounds it finished; nothing downstream (KMeans, the CLI) sees the NaN."""
from __future__ import annotations

import pytest
import torch

from cfl_core.algorithms import ALGORITHMS
from cfl_core.cli import main
from cfl_core.config import ExperimentConfig
from cfl_core.errors import Diverged
from cfl_core.experiment import Experiment
from cfl_core.run_reader import load_run

SMALL = dict(dataset="digits", partition="feature-skew", clusters=2, clients_per_cluster=3, samples_per_client=30,
             local_epochs=1, device="cpu", rounds=4)


def config(name: str, **changes) -> ExperimentConfig:
    return ExperimentConfig(**{**SMALL, "algorithm": name, "models": 2 if ALGORITHMS[name].needs_models else None,
                               **changes})


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_a_huge_learning_rate_ends_every_algorithm_as_diverged_naming_the_learning_rate(name, tmp_path):
    try:
        summary = Experiment(config(name, lr=1e6), out_dir=tmp_path / "r").run()
    except Diverged as exc:  # an algorithm that trains in its set-up can blow up before round 0
        assert "during the set-up" in str(exc)
        summary = load_run(tmp_path / "r").summary
    assert summary["status"] == "diverged"
    assert "learning rate (lr=1e+06)" in summary["error"] and "lr=100000" in summary["error"]
    assert load_run(tmp_path / "r").status == "diverged"


def test_finished_rounds_are_kept_and_the_bad_round_is_not_recorded(tmp_path):
    exp = Experiment(config("ifca"), out_dir=tmp_path / "r")
    exp.step()
    exp.step()
    exp.engine.train_cfg = type(exp.engine.train_cfg)(1, 20, 1e6, "sgd", 0.9)  # the lr blows up from round 2 on
    summary = exp.run()
    assert summary["status"] == "diverged" and summary["rounds_completed"] == 2
    assert "in round 2" in summary["error"]
    saved = load_run(tmp_path / "r")
    assert [r.round for r in saved.records] == [0, 1] and saved.summary["error"] == summary["error"]


def test_nan_parameters_are_caught_before_clove_clusters_them(monkeypatch):
    """CLoVE with unknown K ran KMeans on NaN loss vectors (a traceback); now the round ends as diverged."""
    exp = Experiment(config("clove", rounds=5, options={"unknown_k": True}))
    exp.step()
    exp.algorithm.models = torch.full_like(exp.algorithm.models, float("nan"))
    summary = exp.run()
    assert summary["status"] == "diverged" and "not finite numbers" in summary["error"]
    assert summary["rounds_completed"] == 1


def test_clove_on_the_linear_mixture_with_a_large_learning_rate():
    summary = Experiment(config("clove", dataset="synthetic-linear", partition="linear-mixture", lr=10.0)).run()
    assert summary["status"] == "diverged" and "lr=10" in summary["error"]


def test_a_bad_but_learning_run_is_not_called_diverged():
    assert Experiment(config("fedavg", lr=10.0)).run()["status"] == "finished"  # poor accuracy, but no blow-up


def test_the_cli_reports_divergence_in_one_line(tmp_path, capsys):
    code = main(["run", "--algorithm", "fedavg", "--clusters", "2", "--clients-per-cluster", "3",
                 "--samples-per-client", "30", "--rounds", "3", "--lr", "1e6", "--out", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert code == 1 and "fedavg: diverged after 0 rounds" in out
    assert err.strip().splitlines()[-1].startswith("error: training diverged in round 0")
    assert "Traceback" not in err
