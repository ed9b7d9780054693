"""The dashboard's job manager, saved-run store and URL references, without any browser session."""
from __future__ import annotations

import json
import threading
import time

import pytest

from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment
from cfl_ui.jobs import jobs as J
from cfl_ui.jobs import manager as M
from cfl_ui.jobs import snapshots as S
from cfl_ui.jobs.run_refs import new_job_id, parse_ref, ref_folder
from cfl_ui.charts.tables import metrics_csv
from cfl_ui.jobs.store import delete_job, job_owner, list_rows, load_job

SMALL = ExperimentConfig(dataset="digits", partition="feature-skew", clusters=2, clients_per_cluster=3,
                         samples_per_client=30, algorithm="clove", models=2, rounds=4, local_epochs=1)


def wait_for(predicate, timeout=60.0, every=0.02):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return False


@pytest.fixture
def manager(tmp_path):
    m = M.JobManager(tmp_path / "runs", max_running=2)
    yield m
    m.shutdown(10)


class SlowExperiment(Experiment):
    """A real experiment whose rounds wait on a gate (to test queueing and controls deterministically)."""

    gate: threading.Event | None = None

    def step(self):
        if self.gate is not None:
            assert self.gate.wait(30)
        return super().step()


class FailingExperiment(Experiment):
    def step(self):
        if self.round == 1:
            raise RuntimeError("boom in round 1")
        return super().step()


def test_single_job_runs_to_the_end_and_writes_its_folder(manager):
    job = manager.submit([S.UnitSpec("", SMALL, "CLoVE")], kind="playground", owner="me")
    assert job.join(120)
    snap = manager.snapshot(job.id)
    assert snap.status == S.FINISHED and not snap.live
    unit = snap.units[0]
    assert unit.rounds_done == 4 and unit.summary["status"] == "finished"
    assert [r.round for r in unit.records] == [0, 1, 2, 3]
    assert snap.device and unit.meta["device"] in ("cpu", "cuda")
    folder = manager.root / job.id
    for name in ("config.json", "rounds.jsonl", "summary.json", "meta.json", J.UI_FILE):
        assert (folder / name).exists(), name
    ui = json.loads((folder / J.UI_FILE).read_text())
    assert ui["owner"] == "me" and ui["status"] == "finished"


def test_invalid_config_is_refused_before_any_work(manager):
    with pytest.raises(ConfigError) as err:
        manager.submit([S.UnitSpec("", SMALL.replace(samples_per_client=10**6))])
    assert err.value.parameter == "samples_per_client"
    assert not list(manager.root.iterdir())


def test_pause_step_run_and_stop(manager):
    job = manager.submit([S.UnitSpec("", SMALL.replace(rounds=6))], start="step")
    assert wait_for(lambda: job.status == S.PAUSED and manager.snapshot(job.id).rounds_done == 1)
    job.step(2)
    assert wait_for(lambda: job.status == S.PAUSED and manager.snapshot(job.id).rounds_done == 3)
    time.sleep(0.2)
    assert manager.snapshot(job.id).rounds_done == 3  # paused means paused
    job.stop()
    assert job.join(30)
    snap = manager.snapshot(job.id)
    assert snap.status == S.STOPPED and snap.units[0].summary["status"] == "stopped"
    assert snap.units[0].summary["rounds_completed"] == 3


def test_pause_then_resume_finishes(manager):
    SlowExperiment.gate = threading.Event()
    m = M.JobManager(manager.root, max_running=1, experiment_factory=SlowExperiment)
    try:
        job = m.submit([S.UnitSpec("", SMALL)])
        assert wait_for(lambda: job.status == S.RUNNING)
        job.pause()
        SlowExperiment.gate.set()
        assert wait_for(lambda: job.status == S.PAUSED)
        done = m.snapshot(job.id).rounds_done
        assert done < 4
        job.run()
        assert job.join(60) and m.snapshot(job.id).status == S.FINISHED
    finally:
        SlowExperiment.gate.set()
        m.shutdown(10)
        SlowExperiment.gate = None


def test_queue_limits_concurrent_jobs_and_reports_positions(tmp_path):
    SlowExperiment.gate = threading.Event()
    m = M.JobManager(tmp_path, max_running=1, experiment_factory=SlowExperiment)
    try:
        first = m.submit([S.UnitSpec("", SMALL)], job_id="job-a-0000")
        assert wait_for(lambda: first.status == S.RUNNING)
        second = m.submit([S.UnitSpec("", SMALL)], job_id="job-b-0000")
        third = m.submit([S.UnitSpec("", SMALL)], job_id="job-c-0000")
        assert wait_for(lambda: m.snapshot(third.id).queue_position == 2)
        assert m.snapshot(second.id).status == S.QUEUED and m.snapshot(second.id).queue_position == 1
        assert m.scheduler.running == 1
        third.stop()  # a queued job can be stopped without ever running
        assert third.join(10) and m.snapshot(third.id).status == S.STOPPED
        SlowExperiment.gate.set()
        assert first.join(60) and second.join(60)
        assert m.snapshot(second.id).status == S.FINISHED
        assert m.snapshot(third.id).units[0].records == ()
    finally:
        SlowExperiment.gate.set()
        m.shutdown(10)
        SlowExperiment.gate = None


def test_worker_exception_becomes_a_readable_error_quickly(tmp_path):
    m = M.JobManager(tmp_path, experiment_factory=FailingExperiment)
    try:
        job = m.submit([S.UnitSpec("", SMALL)])
        started = time.time()
        assert wait_for(lambda: m.snapshot(job.id).status == S.FAILED, timeout=30)
        assert time.time() - started < 30
        snap = m.snapshot(job.id)
        assert snap.error == "RuntimeError: boom in round 1"
        assert "Traceback" in snap.traceback and "boom in round 1" in snap.traceback
        assert snap.units[0].rounds_done == 1  # the finished round is kept
        disk = load_job(m.root, job.id)  # and the error survives a restart
        assert disk.status == S.FAILED and disk.error == "RuntimeError: boom in round 1"
        assert disk.units[0].summary["status"] == "failed"
    finally:
        m.shutdown(10)


def test_batch_lockstep_shares_one_federation_and_identical_initial_models(manager):
    units = [S.UnitSpec("ifca", SMALL.replace(algorithm="ifca", init="same")),
             S.UnitSpec("clove", SMALL.replace(init="same"))]
    job = manager.submit(units, kind="compare", schedule=S.LOCKSTEP)
    assert job.join(120)
    snap = manager.snapshot(job.id)
    assert [u.ref for u in snap.units] == [f"{job.id}/ifca", f"{job.id}/clove"]
    assert all(u.rounds_done == 4 for u in snap.units)
    assert (manager.root / job.id / "ifca" / "rounds.jsonl").exists()
    ifca, clove = snap.units
    assert ifca.records[-1].models_in_use == 1  # the collapse: one model takes every client
    assert clove.records[-1].ari == pytest.approx(1.0)


def test_sequential_batch_fills_in_unit_by_unit(manager):
    units = [S.UnitSpec(f"s{seed}", SMALL.replace(seed=seed, rounds=2), tags={"seed": seed}) for seed in range(3)]
    job = manager.submit(units, kind="ifca-init", schedule=S.SEQUENTIAL)
    assert job.join(120)
    snap = manager.snapshot(job.id)
    assert [u.tags["seed"] for u in snap.units] == [0, 1, 2]
    assert all(u.status == S.FINISHED for u in snap.units)
    folder = manager.root / job.id
    for a, b in (("s0", "s1"), ("s1", "s2")):  # each unit started only after the previous one ended
        assert (folder / a / "summary.json").stat().st_mtime_ns <= (folder / b / "config.json").stat().st_mtime_ns


def test_reattach_from_disk_after_the_process_forgets(manager, tmp_path):
    job = manager.submit([S.UnitSpec("", SMALL)], owner="me")
    assert job.join(120)
    other = M.JobManager(manager.root)  # a restarted server: nothing in memory
    snap = other.snapshot(job.id)
    assert snap.from_disk and snap.status == S.FINISHED
    assert snap.units[0].rounds_done == 4 and snap.units[0].records[-1].round == 3


def test_a_run_whose_process_died_reopens_read_only_as_interrupted(manager):
    job = manager.submit([S.UnitSpec("", SMALL)], owner="me")
    assert job.join(120)
    folder = manager.root / job.id
    (folder / "summary.json").unlink()  # as if the process died before the end
    ui = json.loads((folder / J.UI_FILE).read_text())
    ui["status"] = "running"
    (folder / J.UI_FILE).write_text(json.dumps(ui))
    import os

    old = time.time() - 3600
    os.utime(folder / "rounds.jsonl", (old, old))
    snap = M.JobManager(manager.root).snapshot(job.id)
    assert snap.status == S.INTERRUPTED and snap.units[0].status == S.INTERRUPTED
    assert snap.units[0].rounds_done == 4 and not snap.live


def test_isolation_owner_filter_and_cli_runs(manager):
    mine = manager.submit([S.UnitSpec("", SMALL)], owner="alice")
    theirs = manager.submit([S.UnitSpec("", SMALL)], owner="bob")
    assert mine.join(120) and theirs.join(120)
    exp = Experiment(SMALL, out_dir=manager.root / "cli-run")  # started elsewhere: nobody's
    exp.run()
    rows, hidden = list_rows(manager.root, "alice")
    refs = {r.ref for r in rows}
    assert mine.id in refs and "cli-run" in refs and theirs.id not in refs
    assert hidden == 1
    assert job_owner(manager.root, theirs.id) == "bob" and job_owner(manager.root, "cli-run") == ""
    every, _ = list_rows(manager.root, None)
    assert theirs.id in {r.ref for r in every}


def test_run_ids_are_unguessable_and_references_never_escape(tmp_path):
    a, b = new_job_id("clove"), new_job_id("clove")
    assert a != b and len(a.rsplit("-", 1)[1]) == 16
    assert parse_ref("job-1/unit") == ("job-1", "unit")
    assert parse_ref("job-1") == ("job-1", None)
    assert parse_ref("readme/core/iid/seed0/clove") == ("readme/core/iid/seed0", "clove")  # CLI runs, nested
    assert parse_ref("/".join("abcdefgh")) == ("a/b/c/d/e/f/g", "h")
    for bad in ("../etc", "a/../../b", "a/..", "..", "/abs", "a//b", "a/", "/", "a/b c", "", None, "a b",
                "a\\b", ".hidden", "a/.x", "x..y/z", "/".join("abcdefghi")):
        assert parse_ref(bad) is None, bad
        assert ref_folder(tmp_path, bad or "") is None
    assert ref_folder(tmp_path, "a/b/c") == tmp_path / "a" / "b" / "c"
    assert not delete_job(tmp_path, "../x")


def test_delete_and_metrics_csv(manager):
    job = manager.submit([S.UnitSpec("", SMALL)])
    assert job.join(120)
    snap = manager.snapshot(job.id)
    csv = metrics_csv(snap.units[0].records)
    header = csv.splitlines()[0].split(",")
    assert header[:3] == ["round", "phase", "accuracy"] and "stable_share" in header
    assert len(csv.strip().splitlines()) == 5
    manager.forget(job.id)
    assert delete_job(manager.root, job.id) and not (manager.root / job.id).exists()
    assert manager.snapshot(job.id) is None


def test_estimate_refuses_requests_too_large_with_the_numbers():
    from cfl_ui.jobs.estimate import estimate

    ok = estimate(SMALL)
    assert ok.ok and ok.message() is None and "on " in ok.describe()
    big = ExperimentConfig(dataset="fashion-mnist", clusters=10, clients_per_cluster=60, samples_per_client=100,
                           models=10, rounds=500)
    est = estimate(big)
    assert not est.ok
    msg = est.message()
    assert "needs about" in msg and "the limit here is" in msg and "min" in msg
