"""`kill` (SIGTERM) stops a command as Ctrl-C does: the run says it stopped, the sweep writes its tables, nothing
finished is lost. (A shell's background job ignores Ctrl-C, so SIGTERM is how one is stopped.)"""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--clusters", "2", "--clients-per-cluster", "2", "--samples-per-client", "20"]


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cfl_core", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_rounds(proc: subprocess.Popen, rounds: Path, at_least: int, limit: float = 120.0) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if rounds.is_file() and len(rounds.read_text().splitlines()) >= at_least:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"no {at_least} rounds in {rounds} within {limit} s")


def _terminate(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, err


def test_a_run_stopped_with_sigterm_writes_its_summary_as_stopped(tmp_path):
    out = tmp_path / "run"
    proc = _start(["run", "--algorithm", "fedavg", "--rounds", "100000", *SMALL, "--out", str(out)])
    _wait_for_rounds(proc, out / "rounds.jsonl", 3)
    code, err = _terminate(proc)
    assert code == 130, err
    summary = json.loads((out / "summary.json").read_text())
    rounds = (out / "rounds.jsonl").read_text().splitlines()
    assert summary["status"] == "stopped" and summary["rounds_completed"] == len(rounds) >= 3


def test_a_sweep_stopped_with_sigterm_writes_its_tables_and_keeps_its_finished_runs(tmp_path):
    spec = tmp_path / "spec.json"
    # the first point finishes at once; the second runs until it is stopped
    spec.write_text(json.dumps({"name": "stopme", "base": {"clusters": 2, "clients_per_cluster": 2,
                                                           "samples_per_client": 20, "algorithm": "fedavg"},
                                "cases": [{"rounds": 2}, {"rounds": 100000}], "folder": "r{rounds}"}))
    out = tmp_path / "sweep"
    proc = _start(["sweep", str(spec), "--out", str(out), "--executor", "serial"])
    deadline = time.monotonic() + 120
    while not (out / "r2" / "sweep_point.json").is_file():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate() if proc.poll() else "slow"
        time.sleep(0.2)
    time.sleep(1.0)  # the second run under way
    code, err = _terminate(proc)
    assert code == 130 and "interrupted" in err, err
    results = (out / "results.csv").read_text().splitlines()
    assert len(results) == 3 and ",finished," in results[1] and ",missing," in results[2]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "end" and events[-1]["state"] == "interrupted"
