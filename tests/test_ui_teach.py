"""Issue 14's walk-through fixes, each checked where it can be without a browser."""
from __future__ import annotations

import csv
import io
import time

import pytest

from cfl_core.config import ExperimentConfig
from cfl_ui import manager as M
from cfl_ui import snapshots as S

SMALL = dict(dataset="digits", partition="feature-skew", clusters=2, clients_per_cluster=2, samples_per_client=30,
             models=2, rounds=3, local_epochs=1)


@pytest.fixture
def manager(tmp_path):
    m = M.JobManager(tmp_path / "runs", max_running=2)
    yield m
    m.shutdown(10)


def compare_job(manager, algorithms):
    units = [S.UnitSpec(a, ExperimentConfig(**SMALL, algorithm=a), a) for a in algorithms]
    job = manager.submit(units, kind="compare", owner="me", schedule=S.LOCKSTEP)
    assert job.join(120)
    return manager.snapshot(job.id)


def test_compare_rounds_csv_holds_every_algorithms_rows(manager):
    from cfl_ui.tables import rounds_csv

    snap = compare_job(manager, ["clove", "ifca", "fedavg"])
    text = rounds_csv(snap.units)
    assert "\r" not in text
    rows = list(csv.DictReader(io.StringIO(text)))
    per_algo = {a: [r for r in rows if r["algorithm"] == a] for a in ("clove", "ifca", "fedavg")}
    assert {a: len(v) for a, v in per_algo.items()} == {"clove": 3, "ifca": 3, "fedavg": 3}
    assert [r["round"] for r in per_algo["clove"]] == ["0", "1", "2"]  # the first algorithm's rows are there
    # every value of a row comes from its own run's record
    clove = snap.units[0].records
    assert float(per_algo["clove"][-1]["accuracy"]) == pytest.approx(clove[-1].accuracy)


def test_side_by_side_status_counts_each_runs_rounds_not_their_sum(manager):
    from cfl_ui.live_view import rounds_text

    snap = compare_job(manager, ["ifca", "clove"])
    assert rounds_text(snap.units) == "3 of 3 rounds each"
    assert rounds_text(snap.units[:1]) == "3 of 3 rounds"


def test_elapsed_time_leaves_out_paused_time(manager):
    job = manager.submit([S.UnitSpec("", ExperimentConfig(**SMALL, algorithm="clove"))], owner="me", start="step")
    deadline = time.time() + 60
    while time.time() < deadline and not (job.status == "paused" and job.snapshot().rounds_done == 1):
        time.sleep(0.02)
    assert job.status == "paused"
    time.sleep(1.5)
    paused = job.snapshot()
    assert paused.paused >= 1.4 and paused.elapsed < (time.time() - paused.started) - 1.4
    job.run()
    assert job.join(120)
    done = manager.snapshot(job.id)
    assert done.paused >= 1.4
    assert done.elapsed == pytest.approx(done.ended - done.started - done.paused)
    # reopened from disk, the pause is still left out
    manager.forget(job.id)
    from cfl_ui.store import load_job

    again = load_job(manager.root, job.id)
    assert again.paused == pytest.approx(done.paused, abs=1e-6)
