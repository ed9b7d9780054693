"""A tiny sweep through a real local Ray (no mock) gives the records of the local pool and of a run alone.

2 algorithms x 2 seeds on digits, 3 rounds. One Ray session for the module (its start-up is seconds).
Records are compared field by field except `seconds` (wall time); torch runs one thread per run in
every executor (--cpus-per-run 1, and conftest pins this process to one thread for the run alone).
"""
import json
from pathlib import Path

import pytest
import ray  # pinned in requirements.txt: make test installs it

from cfl_core.experiment import Experiment
from cfl_core.sweep import SweepSpec, run_sweep

SPEC = {"name": "tiny", "base": {"dataset": "digits", "rounds": 3},
        "grid": {"algorithm": ["clove", "ifca"], "seed": [0, 1]}}


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield
    ray.shutdown()


def _records(folder: Path) -> list[dict]:
    lines = (folder / "rounds.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "seconds"} for line in lines]


def _run_files(folder: Path) -> dict:
    summary = json.loads((folder / "summary.json").read_text())
    summary.pop("total_seconds")
    return {"records": _records(folder), "config": json.loads((folder / "config.json").read_text()),
            "partition": json.loads((folder / "partition.json").read_text()), "summary": summary}


def test_ray_gives_the_records_of_the_local_pool_and_of_a_run_alone(tmp_path, ray_session):
    spec = SweepSpec.from_dict(SPEC)
    on_ray = run_sweep(spec, tmp_path / "ray", executor="ray")
    assert not on_ray.failed and on_ray.progress.done == 4
    markers = [json.loads((tmp_path / "ray" / p.folder / "sweep_point.json").read_text())
               for p in on_ray.expansion.points]
    assert {m["executor"] for m in markers} == {"ray"} and {m["threads"] for m in markers} == {1}
    local = run_sweep(spec, tmp_path / "local", executor="local", workers=2)
    assert not local.failed
    for point in on_ray.expansion.points:
        ray_files = _run_files(tmp_path / "ray" / point.folder)
        assert ray_files == _run_files(tmp_path / "local" / point.folder), point.folder
        alone = Experiment(point.config, out_dir=tmp_path / "alone" / point.folder)
        alone.run()
        assert ray_files == _run_files(tmp_path / "alone" / point.folder), point.folder
    # the records differ between points: the comparison above could fail
    first, second = (_records(tmp_path / "ray" / p.folder) for p in on_ray.expansion.points[:2])
    assert first != second
    # and the same sweep on Ray again runs nothing
    again = run_sweep(spec, tmp_path / "ray", executor="ray")
    assert again.progress.skipped == 4 and again.progress.done == 0
    assert (tmp_path / "ray" / "summary.md").read_text().count("| feature-skew |") == 2
