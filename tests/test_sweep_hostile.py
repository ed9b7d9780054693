"""Sweep and run folders as a hostile user leaves them, and sweep specs as a hostile user writes them.

Each failure kind of issue 31's section 2 has a test here (the pages' side is tests/test_ui_sweeps_hostile.py):
a malformed file of a sweep makes it *damaged* with the reason and nothing else; a named pipe in place of any
run or sweep file never blocks a reader; a huge rounds.jsonl is read only up to its limit, and says so; specs
are bounded (alias expansion, nesting, size, UTF-8) with one line, at once, in bounded memory; a sweep deletes
only what it made; two writers into one folder never mix; a live run or sweep is never resumed by another.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from cfl_core.cli import main
from cfl_core.errors import ConfigError
from cfl_core.files import ROUNDS_LIMIT, count_lines, read_text
from cfl_core.run_reader import load_run
from cfl_core.sweep import SweepSpec, read_spec_file, run_sweep
from cfl_core.sweep.status import driver_active, list_sweeps, load_sweep, sweep_status
from cfl_core.sweep.tables import parse_results

ROOT = Path(__file__).resolve().parent.parent
TINY = {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 20, "rounds": 2}
SPEC = {"name": "tiny", "base": TINY, "grid": {"algorithm": ["oracle", "fedavg"], "seed": [0, 1]}}


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sweeps") / "tiny"
    run_sweep(SweepSpec.from_dict(SPEC), out, executor="serial", command="python -m cfl_core sweep tiny.json")
    return out


@pytest.fixture
def sweeps(tmp_path, finished_sweep) -> Path:
    """A folder of sweeps: one good, copies to damage."""
    root = tmp_path / "runs" / "sweeps"
    root.mkdir(parents=True)
    shutil.copytree(finished_sweep, root / "good", symlinks=True)
    return root


def damaged_copy(root: Path, name: str) -> Path:
    shutil.copytree(root / "good", root / name, symlinks=True)
    return root / name


def within(seconds: float, fn, *args):
    """fn(*args) in a thread; fails the test when it has not returned within `seconds` (a reader that blocks)."""
    out: dict = {}

    def call():
        try:
            out["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - shown by the assertion below
            out["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{getattr(fn, '__name__', fn)} still reading after {seconds} s (blocked?)"
    if "error" in out:
        raise out["error"]
    return out["value"], time.monotonic() - started


# -- malformed files: the sweep is damaged, with the reason; the others are fine -------------------------------------
DAMAGE = {
    "points-not-points": ("sweep.json", '{"name": "x", "points": [1]}', "points[0] is not a point"),
    "points-escape": ("sweep.json", '{"name": "x", "points": [{"key": "k", "folder": "../../etc"}]}',
                      "points[0] is not a point"),
    "progress-list": ("progress.json", "[1, 2]", "progress.json holds a list"),
    "progress-not-utf8": ("progress.json", b"\xff\xfe{}", "progress.json is not UTF-8"),
    "results-abc": ("results.csv", None, "final_ari 'abc' is not a number"),
    "sweep-truncated": ("sweep.json", "TRUNCATE", "sweep.json is not valid JSON"),
    "sweep-missing": ("sweep.json", "DELETE", "sweep.json is missing"),
    "results-missing": ("results.csv", "DELETE", "results.csv is missing"),
    "results-no-columns": ("results.csv", "a,b\n1,2\n", "results.csv: no column key, folder, status"),
}


def damage(folder: Path, file: str, content) -> None:
    path = folder / file
    if content == "DELETE":
        path.unlink()
    elif content == "TRUNCATE":
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    elif content is None:  # results.csv with a measure that is not a number
        lines = path.read_text().splitlines()
        header = lines[0].split(",")
        cells = lines[1].split(",")
        cells[header.index("final_ari")] = "abc"
        path.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_malformed_sweep_file_makes_that_sweep_damaged_with_the_reason_and_nothing_else(sweeps, kind):
    file, content, reason = DAMAGE[kind]
    damage(damaged_copy(sweeps, "bad"), file, content)
    listed = {s.folder.name: s for s in list_sweeps(sweeps.parent)}
    assert set(listed) == {"good", "bad"}
    assert listed["good"].listed_state == "finished" and not listed["good"].problems
    assert listed["bad"].listed_state == "damaged", listed["bad"]
    assert any(reason in p for p in listed["bad"].problems), listed["bad"].problems
    saved = load_sweep(sweeps / "bad")  # read whole: never raises
    assert saved is not None and any(reason in p for p in saved.problems)
    if kind == "results-abc":  # the other rows and measures are kept; the bad value is None
        assert len(saved.results) == 4 and saved.results[0]["final_ari"] is None
        assert saved.results[1]["final_ari"] is not None


def test_results_csv_that_csv_cannot_read_keeps_the_rows_before_it():
    text = "key,folder,status,final_ari\nk1,a,finished,1\nk2,b,finished," + "9" * 200_000 + "\nk3,c,finished,1\n"
    rows, problems = parse_results(text)
    assert [r["key"] for r in rows] == ["k1"] and problems and "results.csv line" in problems[0]


def test_the_readme_tables_script_names_a_damaged_run_summary_in_one_line(sweeps, tmp_path):
    """The tables come from the sweep's run folders (results.csv may be stale): a run's summary.json whose
    measure is not a number is named, in one line; the damaged results.csv beside it is not what is read."""
    bad = damaged_copy(sweeps, "bad")
    damage(bad, "results.csv", None)
    first = json.loads((bad / "sweep.json").read_text())["points"][0]["folder"]
    summary = json.loads((bad / first / "summary.json").read_text())
    (bad / first / "summary.json").write_text(json.dumps({**summary, "final_ari": "abc"}))
    readme = tmp_path / "README.md"
    readme.write_text("<!-- sweep: bad pivot=final_ari columns=algorithm -->\n| a |\n|---|\n")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_tables.py"), "--readme", str(readme),
                           "--runs", str(sweeps), "--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"{first}/summary.json: final_ari 'abc' is not a number" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# -- named pipes and huge files: no reader blocks or explodes --------------------------------------------------------
@pytest.mark.parametrize("file", ["sweep.json", "progress.json", ".lock", "results.csv"])
def test_a_named_pipe_in_place_of_a_sweep_file_never_blocks_a_reader(sweeps, file):
    bad = damaged_copy(sweeps, "bad")
    (bad / file).unlink(missing_ok=True)
    os.mkfifo(bad / file)
    listed, _ = within(10, list_sweeps, sweeps.parent)
    [status] = [s for s in listed if s.folder.name == "bad"]
    assert status.listed_state == "damaged"
    assert any(f"{file} is a named pipe (FIFO), not a file: skipped" in p for p in status.problems), status.problems
    within(10, load_sweep, bad)


@pytest.mark.parametrize("file", ["rounds.jsonl", "summary.json", "meta.json", "config.json", "heartbeat.json"])
def test_a_named_pipe_in_place_of_a_run_file_never_blocks_a_reader(sweeps, file):
    run = next(p.parent for p in (sweeps / "good").glob("*/config.json"))
    (run / file).unlink()
    os.mkfifo(run / file)
    saved, _ = within(10, load_run, run)
    if file != "heartbeat.json":  # the heartbeat is not part of the records: it is only not used
        assert any(f"{file} is a named pipe (FIFO)" in p for p in saved.problems), saved.problems
    assert within(10, count_lines, run / file)[0] == 0
    within(10, sweep_status, sweeps / "good")


def test_a_huge_rounds_file_is_read_only_up_to_its_limit_and_says_so(sweeps):
    run = next(p.parent for p in (sweeps / "good").glob("*/config.json"))
    rounds = run / "rounds.jsonl"
    kept = len(rounds.read_text().splitlines())
    with open(rounds, "r+b") as fh:  # 1 GB, sparse: the file system stores only the real rounds at its start
        fh.truncate(2**30)
    saved, seconds = within(30, load_run, run)
    assert len(saved.records) == kept
    assert any("rounds.jsonl is 1.0 GB, over the 128 MB read at most" in p for p in saved.problems), saved.problems
    assert seconds < 10
    text, problem = read_text(rounds)
    assert text is None and "over the 32 MB this reader takes: skipped" in problem
    assert ROUNDS_LIMIT == 128 * 2**20


# -- specs are data, bounded ---------------------------------------------------------------------------------------
LAUGHS = "".join(f"{a}: &{a} [{', '.join([f'*{p}'] * 9)}]\n" for p, a in zip("abcdefgh", "bcdefghi"))
HOSTILE_SPECS = {
    "laughs.yaml": ('a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + LAUGHS,
                    "a spec of at most 100,000 values"),
    "merge.yaml": ("a: &a {x1: 1, x2: 2, x3: 3, x4: 4, x5: 5, x6: 6, x7: 7, x8: 8, x9: 9}\n" + "".join(
        f"{n}: &{n} {{<<: [{', '.join([f'*{p}'] * 9)}], y: 1}}\n" for p, n in zip("abcdefgh", "bcdefghi")),
        "a spec of at most 100,000 values"),
    "self.yaml": ("a: &a [*a]\ngrid: {seed: *a}\n", "nested at most 32 levels deep (or one that holds itself)"),
    "deep.json": ("[" * 100_000 + "]" * 100_000, "nested at most 32 levels deep"),
    "deep.yaml": ("a: " + "[" * 5000 + "]" * 5000, "nested at most 32 levels deep"),
    "deep-but-parsable.json": ("[" * 200 + "]" * 200, "nested at most 32 levels deep"),
    "latin1.yaml": (b"name: x\ngrid: {seed: [0, 1]}\ndescription: \xe9t\xe9\n", "UTF-8 text (byte 42 is not)"),
    "huge.json": ('{"grid": {"seed": [' + ",".join(["0"] * 2_000_000) + "]}}", "a spec of at most 256 kB"),
    "python.yaml": ("grid: !!python/object/apply:os.system ['touch pwned']\n", "valid YAML"),
    "list.json": ("[1, 2]", "an object with keys among"),
}


@pytest.mark.parametrize("name", list(HOSTILE_SPECS))
def test_a_hostile_spec_is_one_line_naming_the_problem_at_once_in_bounded_memory(tmp_path, name):
    text, reason = HOSTILE_SPECS[name]
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        read_spec_file(path)
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    message = str(caught.value)
    assert caught.value.parameter == "spec" and reason in message, message
    assert "\n" not in message and len(message) < 400
    assert seconds < 1.0, seconds
    assert peak < 64 * 2**20, peak  # a huge.json is 4 MB on disk: it is never read whole
    assert not (tmp_path / "pwned").exists()


def test_a_named_pipe_as_the_spec_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "spec.yaml")
    _, seconds = within(5, lambda: pytest.raises(ConfigError, read_spec_file, tmp_path / "spec.yaml"))
    with pytest.raises(ConfigError, match="named pipe"):
        read_spec_file(tmp_path / "spec.yaml")


def test_the_cli_prints_a_hostile_spec_as_one_bounded_line(tmp_path, capsys):
    spec = tmp_path / "wide.json"  # a valid JSON object whose unknown key echoes a large value
    spec.write_text(json.dumps({"grid": {"seed": [0]}, "junk": ["x" * 50] * 4000}))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: junk=") and len(err.strip().splitlines()) == 1 and len(err) < 2200
    # the value is cut and says how long it was (by ConfigError's bounded display, or the CLI's 2,000-character cut)
    assert "characters" in err and not (tmp_path / "out").exists()
    path = tmp_path / "laughs.yaml"
    path.write_text(HOSTILE_SPECS["laughs.yaml"][0])
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "100,000 values" in err


# -- a sweep deletes only what it made -------------------------------------------------------------------------------
def test_sweep_out_never_deletes_what_it_did_not_create(tmp_path):
    out = tmp_path / "mine"
    for name in (".tmp", ".trash"):
        (out / name).mkdir(parents=True)
        (out / name / "notes.txt").write_text("mine")
    (out / ".cfl-sweep-tmp" / "not-a-run").mkdir(parents=True)  # even in its own folder: only its own names
    (out / "thesis.tex").write_text("mine")
    outcome = run_sweep(SweepSpec.from_dict(SPEC), out, executor="serial")
    assert outcome.progress.done == 4
    assert (out / ".tmp" / "notes.txt").read_text() == "mine" and (out / ".trash" / "notes.txt").exists()
    assert (out / ".cfl-sweep-tmp" / "not-a-run").is_dir() and (out / "thesis.tex").exists()
    assert not (out / ".cfl-sweep-trash").exists()


def test_a_sweep_refuses_a_folder_of_another_sweep_or_with_files_it_would_overwrite(tmp_path, finished_sweep):
    other = SweepSpec.from_dict({**SPEC, "name": "other"})
    with pytest.raises(ConfigError, match="it holds sweep 'tiny'"):
        run_sweep(other, finished_sweep, executor="serial")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.md").write_text("my notes")
    with pytest.raises(ConfigError, match="it holds summary.md but no sweep.json"):
        run_sweep(SweepSpec.from_dict(SPEC), mine, executor="serial")
    assert (mine / "summary.md").read_text() == "my notes" and not (mine / "sweep.json").exists()
    damaged = tmp_path / "damaged"
    shutil.copytree(finished_sweep, damaged)
    (damaged / "sweep.json").write_text('{"name": ')
    with pytest.raises(ConfigError, match="sweep.json can be read"):
        run_sweep(SweepSpec.from_dict(SPEC), damaged, executor="serial")
    again = run_sweep(SweepSpec.from_dict(SPEC), damaged, executor="serial", replace=True)
    assert again.progress.skipped == 4  # --replace writes over the damaged sweep.json; the finished runs stay


# -- two writers never mix; a live run or sweep is never taken over ------------------------------------------------------
def cli(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "cfl_core", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


def run_flags(seed: int, rounds: int) -> list[str]:
    return ["--algorithm", "fedavg", "--clusters", "2", "--clients-per-cluster", "2", "--samples-per-client", "20",
            "--rounds", str(rounds), "--seed", str(seed), "--device", "cpu"]


def test_two_runs_started_together_into_one_new_out_never_mix(tmp_path):
    out = tmp_path / "same"
    first, second = (cli("run", *run_flags(seed, 30), "--out", str(out)) for seed in (1, 2))
    results = [p.communicate(timeout=300) + (p.returncode,) for p in (first, second)]
    codes = sorted(code for _, _, code in results)
    assert codes[0] == 0 and codes[1] in (1, 2), results  # 2: refused before, 1: refused at its folder's lock
    [(_, refused, _)] = [r for r in results if r[2] != 0]
    assert refused.strip().startswith("error: ") and len(refused.strip().splitlines()) == 1, refused
    # which check refuses it depends on how far the other had got: its lock, its files under the lock, or them
    # already there before (each one line)
    assert any(why in refused for why in ("being written by process", "holds no run yet", "already holds files")), \
        refused
    config = json.loads((out / "config.json").read_text())
    records = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in records] == list(range(30))  # one run's rounds, once each, in order
    assert json.loads((out / "summary.json").read_text())["status"] == "finished"
    winner = 1 if first.returncode == 0 else 2
    assert "Traceback" not in refused
    assert config["seed"] == winner and load_run(out).problems == []


def wait_for(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.1)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the process and its children, nothing else
    proc.communicate(timeout=60)


def test_run_resume_refuses_a_run_that_is_still_going(tmp_path, capsys):
    out = tmp_path / "live"
    live = cli("run", *run_flags(0, 100_000), "--out", str(out))
    try:
        wait_for(lambda: count_lines(out / "rounds.jsonl") >= 2, 120, "the live run's first rounds")
        assert main(["run", "--resume", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"{out} cannot be resumed while it runs: the run folder {out} is being written by process " \
               f"{live.pid}" in err and len(err.strip().splitlines()) == 1, err
        before = count_lines(out / "rounds.jsonl")
        wait_for(lambda: count_lines(out / "rounds.jsonl") > before, 60, "the live run to go on")
        assert live.poll() is None and load_run(out).problems == []
    finally:
        stop(live)
    from cfl_core.experiment import Experiment

    resumed = Experiment.resume(out)  # once its process is gone (killed: no summary), it resumes
    assert resumed.round >= 2
    resumed.close("stopped")


def test_sweep_resume_refuses_a_live_sweep_and_finishes_it_once_it_is_not(tmp_path, capsys):
    spec = tmp_path / "long.json"
    spec.write_text(json.dumps({"name": "long", "base": {**TINY, "rounds": 400}, "grid": {"seed": [0, 1, 2]}}))
    out = tmp_path / "long"
    driver = cli("sweep", str(spec), "--out", str(out), "--executor", "serial")
    try:
        wait_for(lambda: (out / "sweep.json").exists() and driver_active(out), 120, "the sweep's driver")
        assert main(["sweep", "--resume", str(out), "--executor", "serial"]) == 2
        err = capsys.readouterr().err
        assert "a sweep folder no other sweep is writing" in err and len(err.strip().splitlines()) == 1, err
        assert driver.poll() is None
    finally:
        stop(driver)
    assert main(["sweep", "--resume", str(out), "--executor", "serial"]) == 0
    status = sweep_status(out)
    assert (status.state, status.finished, status.points, status.problems) == ("finished", 3, 3, [])
    assert main(["sweep", "--resume", str(tmp_path)]) == 2
    assert "a sweep's folder with a readable sweep.json (there is none)" in capsys.readouterr().err


def test_two_sweeps_started_together_into_one_new_out_never_mix(tmp_path):
    out = tmp_path / "same"
    specs = []
    for name, seeds in (("first", [0, 1]), ("second", [2, 3])):
        specs.append(tmp_path / f"{name}.json")
        specs[-1].write_text(json.dumps({"name": name, "base": TINY, "grid": {"seed": seeds}}))
    procs = [cli("sweep", str(s), "--out", str(out), "--executor", "serial") for s in specs]
    results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    assert sorted(r[2] for r in results) == [0, 2], results
    [(_, refused, _)] = [r for r in results if r[2] == 2]
    assert len(refused.strip().splitlines()) == 1 and ("no other sweep is writing" in refused or "it holds sweep"
                                                       in refused), refused
    winner = "first" if procs[0].returncode == 0 else "second"
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["name"] == winner and len(sweep["points"]) == 2
    markers = list(out.glob("*/sweep_point.json"))
    assert len(markers) == 2  # the other's runs were never written here
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["event"] in ("start", "end")] == ["start", "end"]
