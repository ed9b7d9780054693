"""Running sweeps: the folder, a failing point, resuming after a SIGKILL, and compare as a sweep."""
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cfl_core.data import load_dataset
from cfl_core.errors import DataUnavailable
from cfl_core.run_reader import load_run, walk_run_folders
from cfl_core.sweep import SweepSpec, run_sweep
from cfl_core.sweep.executors import executor_from_environment
from cfl_core.sweep.folder import POINT_FILE, SweepFolder
from cfl_core.sweep.status import list_sweeps, sweep_status
from tests.helpers import process_running, wait_until_ended

ROOT = Path(__file__).resolve().parents[1]
TINY = {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 20, "rounds": 2}


def _events(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def _finished_folders(root: Path) -> dict[str, dict]:
    """folder (relative) -> its sweep_point.json, for every run folder renamed into place."""
    out = {}
    # os.walk, not rglob: the running sweep renames folders out of .tmp while this looks, and rglob raised
    # FileNotFoundError on one that had just moved (os.walk skips what vanished; .tmp and .trash are not entered)
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".tmp", ".trash")]
        if POINT_FILE in files:
            try:
                point = json.loads((Path(folder) / POINT_FILE).read_text())
            except FileNotFoundError:  # moved away since the walk listed it
                continue
            out[str(Path(folder).relative_to(root))] = point
    return out


def test_a_failing_point_is_recorded_and_the_others_finish(tmp_path, monkeypatch):
    # a genuine failure at run time: MNIST's files are not on this machine (validation is static and passes)
    monkeypatch.setenv("CFL_DATA_DIR", str(tmp_path / "no-data"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataUnavailable):
        load_dataset("mnist")
    spec = SweepSpec.from_dict({"base": {**TINY, "algorithm": "fedavg"}, "grid": {"dataset": ["mnist", "digits"]},
                                "folder": "{dataset}"})
    out = tmp_path / "sweep"
    outcome = run_sweep(spec, out, executor="local", workers=1)
    assert outcome.statuses == {outcome.expansion.points[0].key: "failed", outcome.expansion.points[1].key: "finished"}
    failed = json.loads((out / "mnist" / POINT_FILE).read_text())
    assert failed["status"] == "failed" and failed["error"].startswith("DataUnavailable: data set 'mnist'")
    assert "Traceback" in failed["traceback"]
    assert load_run(out / "mnist").status == "failed"  # the dashboard's Runs page shows it as failed
    assert load_run(out / "digits").status == "finished" and len(load_run(out / "digits").records) == 2
    rows = {r["dataset"]: r for r in csv.DictReader((out / "results.csv").open())}
    assert rows["mnist"]["status"] == "failed" and "DataUnavailable" in rows["mnist"]["error"]
    assert rows["digits"]["status"] == "finished" and float(rows["digits"]["final_accuracy"]) > 0
    assert "1 of 1 runs not finished (failed)" in (out / "summary.md").read_text()
    # the same sweep again: the failed point runs again, the finished one does not
    digits_before = (out / "digits" / POINT_FILE).read_text()
    again = run_sweep(spec, out, executor="serial")
    assert again.progress.skipped == 1 and again.progress.failed == 1
    assert (out / "digits" / POINT_FILE).read_text() == digits_before
    session = _events(out)
    last_start = max(i for i, e in enumerate(session) if e["event"] == "start")
    assert [e["key"] for e in session[last_start:] if e["event"] == "started"] == [outcome.expansion.points[0].key]


def test_the_sweep_folder_holds_run_folders_the_runs_listing_finds(tmp_path):
    spec = SweepSpec.from_dict({"name": "tiny", "base": TINY, "grid": {"algorithm": ["oracle", "fedavg"], "seed": [0, 1]},
                                "folder": "seed{seed}/{algorithm}"})
    out = tmp_path / "runs" / "sweeps" / "tiny"
    run_sweep(spec, out, executor="serial", command="python -m cfl_core sweep tiny.json")
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["spec"]["grid"] == {"algorithm": ["oracle", "fedavg"], "seed": [0, 1]}
    assert [p["folder"] for p in sweep["points"]] == ["seed0/oracle", "seed1/oracle", "seed0/fedavg", "seed1/fedavg"]
    assert len({p["key"] for p in sweep["points"]}) == 4
    found = {"/".join(parts) for parts, _, _ in walk_run_folders(tmp_path / "runs", max_depth=6)}
    assert found == {f"sweeps/tiny/{p['folder']}" for p in sweep["points"]}  # no hidden or half-written folder
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(r["algorithm"], r["seed"], r["status"]) for r in rows] == [
        ("oracle", "0", "finished"), ("oracle", "1", "finished"), ("fedavg", "0", "finished"), ("fedavg", "1", "finished")]
    assert {"final_accuracy", "best_accuracy", "final_ari", "first_round_ari_0_9", "mb_sent", "seconds"} <= set(rows[0])
    assert float(rows[0]["final_ari"]) == 1.0 and float(rows[0]["mb_sent"]) > 0
    summary = (out / "summary.md").read_text()
    assert "    python -m cfl_core sweep tiny.json" in summary and "| feature-skew | oracle |" in summary
    assert "2/2" in summary.split("| feature-skew | oracle |")[1].splitlines()[0]
    progress = json.loads((out / "progress.json").read_text())
    assert progress["state"] == "finished" and progress["done"] == 4 and progress["pending"] == 0
    assert not (out / ".tmp").exists()
    # listed with its progress; running while a driver holds the folder
    [listed] = list_sweeps(tmp_path / "runs")
    assert (listed.name, listed.state, listed.finished, listed.points) == ("tiny", "finished", 4, 4)
    holder = SweepFolder(out)
    holder.lock()
    try:
        assert sweep_status(out).state == "running"
    finally:
        holder.unlock()
    assert sweep_status(out).state == "finished" and sweep_status(out / "seed0") is None


def test_algorithms_without_clusters_show_ari_as_not_applicable(tmp_path):
    spec = SweepSpec.from_dict({"base": {**TINY, "partition": "concept-shift"},
                                "grid": {"algorithm": ["fedproto", "fedavg"], "seed": [0]}, "folder": "{algorithm}"})
    outcome = run_sweep(spec, tmp_path / "sweep", executor="serial")
    assert set(outcome.statuses.values()) == {"finished"}
    rows = [line.split(" | ") for line in (tmp_path / "sweep" / "summary.md").read_text().splitlines()
            if line.startswith("| concept-shift")]
    assert rows[0][1] == "fedproto" and rows[0][4:7] == ["n/a", "n/a", "n/a |"]
    assert rows[1][1] == "fedavg" and rows[1][4] == "0.00"  # one model for everyone: a score, and it is 0
    results = {r["algorithm"]: r for r in csv.DictReader((tmp_path / "sweep" / "results.csv").open())}
    assert results["fedproto"]["final_ari"] == "" and float(results["fedproto"]["final_accuracy"]) > 0


def test_the_server_takes_its_executor_from_the_environment(monkeypatch):
    monkeypatch.delenv("CFL_SWEEP_EXECUTOR", raising=False)
    monkeypatch.delenv("CFL_RAY_ADDRESS", raising=False)
    assert executor_from_environment() == ("local", None)
    monkeypatch.setenv("CFL_SWEEP_EXECUTOR", "ray")
    monkeypatch.setenv("CFL_RAY_ADDRESS", "head:6379")
    assert executor_from_environment() == ("ray", "head:6379")
    monkeypatch.setenv("CFL_RAY_ADDRESS", "auto")
    assert executor_from_environment() == ("ray", "auto")
    # Ray Client (ray://) needs ray[client], which the pinned ray lacks: refused with the reason, not a traceback later
    monkeypatch.setenv("CFL_RAY_ADDRESS", "ray://head:10001")
    with pytest.raises(Exception, match=r"CFL_RAY_ADDRESS='ray://head:10001' is not allowed: .*needs ray\[client\]"):
        executor_from_environment()
    monkeypatch.setenv("CFL_SWEEP_EXECUTOR", "local")
    with pytest.raises(Exception, match="CFL_RAY_ADDRESS='ray://head:10001' is not allowed: only with"):
        executor_from_environment()
    monkeypatch.setenv("CFL_SWEEP_EXECUTOR", "dask")
    with pytest.raises(Exception, match="CFL_SWEEP_EXECUTOR='dask' is not allowed: one of local, ray, serial"):
        executor_from_environment()


def test_a_sweep_killed_half_way_resumes_without_running_a_finished_point_again(tmp_path):
    spec = tmp_path / "resume.json"
    spec.write_text(json.dumps({"base": {**TINY, "rounds": 4}, "grid": {"algorithm": ["clove", "fedavg"],
                                                                      "seed": [0, 1, 2, 3]}}))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "cfl_core", "sweep", str(spec), "--out", str(out), "--workers", "1"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while len(_finished_folders(out)) < 2:
            assert proc.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline, "no run finished in time"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its pool worker, at once
        proc.wait()
    before = _finished_folders(out)
    assert 2 <= len(before) < 8, "killed half-way"
    stamps = {f: [(p.name, p.stat().st_mtime_ns) for p in sorted((out / f).iterdir())] for f in before}
    progress = json.loads((out / "progress.json").read_text())
    assert progress["state"] == "running"  # the driver never got to say it ended ...
    status = sweep_status(out)  # ... but its lock went with it
    assert status.state == "interrupted" and status.finished == len(before) and status.points == 8

    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    after = _finished_folders(out)
    assert len(after) == 8 and all(m["status"] == "finished" for m in after.values())
    for folder, marker in before.items():  # finished before the kill: not run again, not touched
        assert after[folder]["run_id"] == marker["run_id"]
        assert [(p.name, p.stat().st_mtime_ns) for p in sorted((out / folder).iterdir())] == stamps[folder]
    events = _events(out)
    resume = max(i for i, e in enumerate(events) if e["event"] == "start")
    assert events[resume]["skipped"] == len(before) and events[resume]["todo"] == 8 - len(before)
    restarted = [e["key"] for e in events[resume:] if e["event"] == "started"]
    assert len(restarted) == 8 - len(before) and not {m["key"] for m in before.values()} & set(restarted)
    finished = [e["key"] for e in events if e["event"] == "finished"]
    assert len(finished) == len(set(finished))  # no point finished twice
    assert not (out / ".tmp").exists() and f"{len(before)} already finished" in done.stdout
    assert sweep_status(out).state == "finished" and sweep_status(out).finished == 8


def test_compare_is_a_sweep_and_the_same_command_again_runs_nothing(tmp_path):
    from cfl_core.cli import main

    args = ["compare", "--algorithms", "oracle,fedavg", "--clusters", "2", "--clients-per-cluster", "2",
            "--samples-per-client", "20", "--rounds", "2", "--executor", "serial", "--out", str(tmp_path)]
    assert main(args) == 0
    first = {name: json.loads((tmp_path / name / POINT_FILE).read_text())["run_id"] for name in ("oracle", "fedavg")}
    table = (tmp_path / "compare.csv").read_text()
    assert main(args) == 0
    assert {name: json.loads((tmp_path / name / POINT_FILE).read_text())["run_id"] for name in first} == first
    assert (tmp_path / "compare.csv").read_text().splitlines()[0] == table.splitlines()[0]
    # other flags into the same folder: compare overwrites, as it always did
    assert main([a if a != "2" or args[i - 1] != "--rounds" else "3" for i, a in enumerate(args)]) == 0
    assert load_run(tmp_path / "oracle").summary["rounds_completed"] == 3


DRIVER = """
import json, sys, time
from cfl_core.sweep.executors import LocalExecutor
executor = LocalExecutor(workers=2)
for warmed in executor.warm():
    warmed.result(timeout=240)
pids = sorted(executor._pool._processes)  # every worker the pool started, whichever ran the warm-ups
print(json.dumps(pids), flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc (Linux)")
def test_a_sweep_driver_killed_with_sigkill_leaves_no_workers_behind(tmp_path):
    # SIGKILL gives the driver no chance to shut its pool down; its workers must notice and end by themselves
    proc = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        pids = json.loads(proc.stdout.readline())
        assert len(pids) == 2 and all(process_running(pid) for pid in pids)
        os.kill(proc.pid, signal.SIGKILL)  # the driver alone: its workers stay in the process group
        proc.wait()
        assert not wait_until_ended(pids), "pool workers outlived their killed driver"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the group, pass or fail
        except ProcessLookupError:
            pass
