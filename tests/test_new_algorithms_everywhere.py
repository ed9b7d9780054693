"""The seven algorithms of the CLoVE paper's comparison that CFL Lab added (k-FED, PACFL, FedProx, Per-FedAvg,
FedProto, FedALA, FedPAC) under every partition and every distribution shift, through the CLI and `compare`."""
from __future__ import annotations

import json

import pytest

from cfl_core.cli import main
from cfl_core.config import ExperimentConfig
from cfl_core.dynamics import SHIFTS
from cfl_core.experiment import Experiment

NEW = ["kfed", "pacfl", "fedprox", "perfedavg", "fedproto", "fedala", "fedpac"]
TINY = dict(dataset="digits", clusters=2, clients_per_cluster=3, samples_per_client=24, rounds=2, local_epochs=1,
            device="cpu")
PARTITIONS = {"label-skew-1": 2, "label-skew-2": 2, "label-skew-3": 2, "label-skew-4": 2, "feature-skew": 2,
              "concept-shift": 2, "iid": 2}


def _check(records, n):
    for r in records:
        assert len(r.client_accuracy) == n and r.accuracy is not None
        assert all(a is not None for a, m in zip(r.client_accuracy, r.assignments) if m >= 0)


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize("partition", sorted(PARTITIONS))
def test_every_partition(name, partition):
    cfg = ExperimentConfig(**TINY, partition=partition, algorithm=name, models=PARTITIONS[partition])
    _check(list(Experiment(cfg)), cfg.num_clients)


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize("shift", sorted(s for s in SHIFTS if s != "none"))
def test_every_shift_with_newcomers_and_partial_participation(name, shift):
    options = {"probability": 1.0} if shift != "incremental" else {}
    cfg = ExperimentConfig(**{**TINY, "rounds": 4}, partition="label-skew-1", algorithm=name, models=2, shift=shift,
                           shift_options=options, newcomer_share=0.34, newcomer_round=2, participation=0.7)
    records = list(Experiment(cfg))
    _check(records, cfg.num_clients)
    assert records[2].extras.get("newcomers")


def test_run_and_compare_from_the_command_line(tmp_path, capsys):
    base = ["--dataset", "digits", "--partition", "concept-shift", "--clusters", "2", "--clients-per-cluster", "2",
            "--samples-per-client", "20", "--rounds", "2", "--device", "cpu"]
    assert main(["run", "--algorithm", "pacfl", "--models", "2", "--option", "threshold=20", *base,
                 "--out", str(tmp_path / "one")]) == 0
    config = json.loads((tmp_path / "one" / "config.json").read_text())
    assert config["options"] == {"threshold": 20.0}
    assert main(["compare", "--algorithms", ",".join(NEW), *base, "--out", str(tmp_path / "all")]) == 0
    table = (tmp_path / "all" / "compare.md").read_text()
    assert all(f"| {name} |" in table for name in NEW)
    for name in NEW:
        summary = json.loads((tmp_path / "all" / name / "summary.json").read_text())
        assert summary["status"] == "finished"
        assert (summary["final_ari"] is None) == (name not in ("kfed", "pacfl"))
