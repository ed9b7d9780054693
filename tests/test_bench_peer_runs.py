"""How the peer benchmark takes its figures (issue 37): fresh-process repetitions alternating the frameworks,
each repetition's ratio and the median, a quiet-machine gate that refuses to write rows when the machine is busy,
no profiler in a timed row, and pfl at the setup its label says (threads split over torchrun's processes, every
worker its share of the clients once per round).

Fake peers and a fake machine load only: nothing here imports flwr or pfl, and nothing runs long. The one test
of the real pfl script runs only where `.venv-peers` exists (`make .venv-peers/.installed`).
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from cfl_core.bench import peer_report, peer_run, peers
from cfl_core.cli import main

REPO = Path(__file__).resolve().parents[1]
FAST = dict(sizes=(8,), rounds=4, cfl_rounds=4, warmup=1, clove_clients=0, threads=1, time_limit=60,
            repetitions=3, quiet_sample=0.0, quiet_wait=0.0, pfl_setups=("2x1", "1x2"))


def quiet(*_):
    pass


class FakeSides:
    """CFL Lab's process and the peers' runs, faked: each call recorded in order, each repetition's seconds
    and other load taken from the lists given (one entry per call of that side)."""

    def __init__(self, monkeypatch, cfl_seconds, peer_seconds, cfl_load=None, peer_load=None):
        self.calls = []
        self.cfl_seconds, self.peer_seconds = list(cfl_seconds), dict(peer_seconds)
        self.cfl_load, self.peer_load = list(cfl_load or []), dict(peer_load or {})
        monkeypatch.setattr(peers, "check_peer_environment", lambda opts: Path(sys.executable))
        monkeypatch.setattr(peers, "run_cfl_process", self.cfl)
        monkeypatch.setattr(peers, "run_peer", self.peer)
        monkeypatch.setattr(peers, "write_workload", lambda path, exp, opts: Path(path).write_text("fake"))
        monkeypatch.setattr(peers, "build_experiment", lambda config: None)
        monkeypatch.setattr(peers, "machine_load", lambda seconds: 0.0)  # a quiet machine unless a test says not

    def cfl(self, opts, algorithm, clients, workdir, log):
        self.calls.append(("CFL Lab", ""))
        s = self.cfl_seconds.pop(0)
        load = self.cfl_load.pop(0) if self.cfl_load else 0.01
        return [peers.PeerRow("CFL Lab", "engine (train + average)", algorithm, clients, 1, s / 2, other_cpus=load),
                peers.PeerRow("CFL Lab", "Experiment.step()", algorithm, clients, 1, s, other_cpus=load,
                              accuracy_curve=[[k, 0.5 + 0.05 * k] for k in range(1, 8)], accuracy=0.85,
                              accuracy_after=7),
                peers.PeerRow("CFL Lab", "step() + run folder", algorithm, clients, 1, s * 1.5, other_cpus=load)]

    def peer(self, opts, framework, variant, data, algorithm, clients, models, python, workdir, log, *,
             profile=False):
        self.calls.append((framework, variant) + (("profiled",) if profile else ()))
        if profile:
            return peers.PeerRow(framework, peers.variant_label(framework, variant), algorithm, clients, models, 99.0,
                                 profiled=True, profile={"pfl process (pid 1)": {"samples": 3, "top": [["f", 1.0]]}})
        s = self.peer_seconds[variant].pop(0)
        loads = self.peer_load.get(variant)
        return peers.PeerRow(framework, peers.variant_label(framework, variant), algorithm, clients, models, s,
                             other_cpus=loads.pop(0) if loads else 0.02,
                             accuracy_curve=[[k, 0.52 + 0.05 * k] for k in range(0, 5)], accuracy=0.8,
                             accuracy_after=4)


# -- alternation, repetitions and their ratios ----------------------------------------------------------------
def test_the_frameworks_alternate_and_each_repetitions_ratio_is_kept_with_the_median(monkeypatch):
    sides = FakeSides(monkeypatch, cfl_seconds=[0.010, 0.008, 0.012],
                      peer_seconds={"2x1": [0.20, 0.24, 0.30], "1x2": [0.40, 0.36, 0.38]})
    report = peers.run_peer_benchmark(peers.PeerOptions(peers=("pfl",), **FAST), log=quiet)
    # A B A B: every repetition is CFL Lab, then each pfl setup, then the next repetition
    assert sides.calls == [("CFL Lab", ""), ("pfl", "2x1"), ("pfl", "1x2")] * 3
    rows = {(r.framework, r.variant): r for r in report.rows}
    step, best, other = (rows[("CFL Lab", "Experiment.step()")], rows[("pfl", "2 processes x 1 thread")],
                         rows[("pfl", "1 process x 2 threads")])
    assert step.repetitions == [0.010, 0.008, 0.012] and step.seconds == 0.010
    assert best.repetitions == [0.20, 0.24, 0.30] and best.seconds == 0.24 and best.best and not other.best
    each = peer_report.rep_ratios(report.rows, best)
    assert [round(v, 6) for v in each] == [20.0, 30.0, 25.0]  # each peer repetition over the CFL Lab one beside it
    by_step, _ = peer_report.ratios(report.rows, best)
    assert by_step == pytest.approx(25.0)  # the median of those, not the ratio of the medians (24.0)
    assert best.rounds == "0 timed x 3 reps"  # the fakes say no round counts
    text = peer_report.markdown(report, "cmd")
    assert "**25.0x** pfl 2 processes x 1 thread (20.0x, 30.0x, 25.0x)" in text
    assert "| fedavg | 8 | 0.0100 s | 0.0050 s | 0.240 s | 0.380 s |" in text  # the quoted table's cells
    assert peer_report.QUOTED in text and peer_report.NOT_QUOTED not in text
    line = peer_report.summary_sentence(report)
    assert "FedAvg at M = 8: **25.0x** pfl 2 processes x 1 thread (20.0-30.0x over 3 repetitions; 0.0100 against " \
           "0.240 s)" in line and "at most 0.02 CPUs" in line and "NOT QUOTED" not in line


def test_a_failed_repetition_stops_that_setup_and_is_said(monkeypatch):
    sides = FakeSides(monkeypatch, cfl_seconds=[0.01] * 3, peer_seconds={"2x1": [0.2, None, 0.2], "1x2": [0.4] * 3})
    original = sides.peer

    def failing(*args, **kwargs):
        row = original(*args, **kwargs)
        if row.seconds is None:
            row.status = "stopped at the time limit (60 s)"
        return row

    monkeypatch.setattr(peers, "run_peer", failing)
    report = peers.run_peer_benchmark(peers.PeerOptions(peers=("pfl",), **FAST), log=quiet)
    assert sides.calls.count(("pfl", "2x1")) == 2 and sides.calls.count(("pfl", "1x2")) == 3
    row = next(r for r in report.rows if r.variant == "2 processes x 1 thread")
    assert row.status == "stopped at the time limit (60 s) (repetition 2)" and row.repetitions == [0.2, None]
    assert peer_report.ratios(report.rows, row) == (None, None)  # a row with a failed repetition is not quoted
    other = next(r for r in report.rows if r.variant == "1 process x 2 threads")
    assert other.best and peer_report.ratios(report.rows, other)[0] == pytest.approx(40.0)


def test_the_learning_check_compares_after_the_same_rounds_from_each_rows_curve(monkeypatch):
    FakeSides(monkeypatch, cfl_seconds=[0.01] * 3, peer_seconds={"2x1": [0.2] * 3, "1x2": [0.4] * 3})
    report = peers.run_peer_benchmark(peers.PeerOptions(peers=("pfl",), check_rounds=3, **FAST), log=quiet)
    (line,) = peer_report.learning_check(report.rows, after=3)
    # CFL Lab after 3 rounds 0.65, pfl 0.67 (not each row's last: 101 and 4 rounds would not compare)
    assert "after 3 rounds" in line and "CFL Lab 0.650" in line and "pfl 0.670" in line and "within 3" in line
    row = peers.PeerRow("pfl", "x", "fedavg", 8, 1, 1.0, accuracy_curve=[[0, 0.1], [2, 0.6]], accuracy=0.7,
                        accuracy_after=4)
    assert row.accuracy_at(6) == (0.6, 2) and row.accuracy_at(1) == (0.1, 0)


# -- the quiet-machine gate --------------------------------------------------------------------------------
def test_a_busy_machine_is_waited_for_then_refused_and_no_row_is_written(monkeypatch, tmp_path, capsys):
    sides = FakeSides(monkeypatch, cfl_seconds=[0.01] * 3, peer_seconds={"2x1": [0.2] * 3, "1x2": [0.4] * 3})
    monkeypatch.setattr(peers, "machine_load", lambda seconds: 1.4)
    opts = peers.PeerOptions(peers=("pfl",), **FAST)
    with pytest.raises(peers.BusyMachine, match="kept 1.40 CPUs busy"):
        peers.wait_until_quiet(opts, quiet, "this")
    report = peers.run_peer_benchmark(opts, log=quiet)
    assert sides.calls == []  # nothing measured
    assert "the machine is busy" in report.facts["refused"] and "no row written from fedavg M=8 on" in report.facts["refused"]
    assert [r.status for r in report.rows] == ["not measured: the machine was busy"]
    assert all(r.seconds is None for r in report.rows)
    text = peer_report.markdown(report, "cmd")
    assert "**Refused part way:**" in text
    # the command says so in one line and exits non-zero, after writing what it has
    monkeypatch.setattr(peers, "machine_load", lambda seconds: 1.4)
    rc = main(["bench", "--peers", "pfl", "--sizes", "8", "--clove-clients", "0", "--quiet-wait", "0",
               "--out", str(tmp_path / "P.md")])
    err = capsys.readouterr().err
    assert rc == 3 and "refused: the machine is busy" in err and "Traceback" not in err
    assert "left as it was" in err and not (tmp_path / "P.md").exists()  # nothing measured: nothing written


def test_the_gate_waits_for_the_machine_to_become_quiet(monkeypatch):
    loads = iter([1.2, 0.9, 0.05])
    monkeypatch.setattr(peers, "machine_load", lambda seconds: next(loads))
    monkeypatch.setattr(peers.time, "sleep", lambda s: None)
    said = []
    opts = peers.PeerOptions(quiet_wait=60)
    assert peers.wait_until_quiet(opts, said.append, "a row") == 0.05
    assert len(said) == 1 and "waiting for a quiet machine before a row: other load 1.20" in said[0]


def test_a_repetition_with_other_load_during_it_is_taken_again_once_then_refused(monkeypatch):
    monkeypatch.setattr(peers, "machine_load", lambda seconds: 0.0)
    opts = peers.PeerOptions(**{**FAST, "busy_above": 0.2})
    loads = iter([0.9, 0.05])
    runs = []

    def run():
        runs.append(1)
        return [peers.PeerRow("pfl", "x", "fedavg", 8, 1, 0.2, other_cpus=next(loads))]

    (row,) = peers.repetition(opts, quiet, "pfl", run)
    assert len(runs) == 2 and row.other_cpus == 0.05 and not row.busy
    loads = iter([0.9, 0.7])
    with pytest.raises(peers.BusyMachine, match="0.70 CPUs busy during pfl .*twice"):
        peers.repetition(opts, quiet, "pfl", run)


def test_allow_busy_measures_marks_every_busy_row_and_never_replaces_a_quoted_table(monkeypatch, tmp_path, capsys):
    FakeSides(monkeypatch, cfl_seconds=[0.01] * 3, peer_seconds={"2x1": [0.2] * 3, "1x2": [0.4] * 3},
              cfl_load=[0.8, 0.01, 0.01])
    monkeypatch.setattr(peers, "machine_load", lambda seconds: 1.4)
    opts = peers.PeerOptions(peers=("pfl",), allow_busy=True, **FAST)
    report = peers.run_peer_benchmark(opts, log=quiet)
    assert "refused" not in report.facts
    step = next(r for r in report.rows if r.variant == "Experiment.step()")
    assert step.busy and step.rep_other_cpus == [0.8, 0.01, 0.01]
    assert not peer_report.is_quoted_report(report)
    text = peer_report.markdown(report, "cmd")
    assert text.splitlines()[2] == peer_report.NOT_QUOTED and "not quoted" in text and "BUSY" in text
    quoted = tmp_path / "PEERS.md"
    quoted.write_text("# a quoted table\n| 1 |\n" + peer_report.NOTES_MARKER + "\nnotes\n")
    with pytest.raises(peer_report.PeerTableProtected):
        peer_report.write_markdown(report, "cmd", quoted)
    assert quoted.read_text().startswith("# a quoted table")
    elsewhere = tmp_path / "busy.md"
    peer_report.write_markdown(report, "cmd", elsewhere)
    peer_report.write_markdown(report, "cmd", elsewhere)  # a busy table may replace a busy table
    assert peer_report.NOT_QUOTED in elsewhere.read_text()
    # the command refuses before any work, in one line
    rc = main(["bench", "--peers", "pfl", "--allow-busy", "--out", str(quoted)])
    err = capsys.readouterr().err
    assert rc == 2 and "holds a quoted table" in err and err.count("\n") == 1
    saved = tmp_path / "peers.json"
    saved.write_text(json.dumps({"facts": {"cpu": "x"}, "rows": []}))
    assert main(["bench", "--peers", "pfl", "--allow-busy", "--json", str(saved)]) == 2


# -- no profiler in a timed row --------------------------------------------------------------------------------
def test_the_profiler_runs_only_in_a_separate_pass_after_every_timed_repetition(monkeypatch):
    sides = FakeSides(monkeypatch, cfl_seconds=[0.01] * 3, peer_seconds={"2x1": [0.2] * 3, "1x2": [0.4] * 3})
    report = peers.run_peer_benchmark(peers.PeerOptions(peers=("pfl",), profile=True, **FAST), log=quiet)
    profiled_at = [i for i, call in enumerate(sides.calls) if "profiled" in call]
    assert profiled_at == [len(sides.calls) - 1]  # one profiled run, after every timed one
    assert sides.calls[-1] == ("pfl", "2x1", "profiled")  # the fastest setup
    (prof,) = [r for r in report.rows if r.profiled]
    assert not prof.best and peer_report.ratios(report.rows, prof) == (None, None)
    assert all(not r.profile for r in report.rows if not r.profiled)
    text = peer_report.markdown(report, "cmd")
    assert "99.0" not in text.split("Where the peers' time goes")[0]  # its time in no table
    assert "separate pass under py-spy" in text


def test_a_timed_peer_command_never_starts_a_profiler(tmp_path):
    opts = peers.PeerOptions()
    for framework, variant in (("pfl", "2x1"), ("pfl", "1x2"), ("flower", "1.0")):
        cmd = peer_run.peer_command(opts, framework, variant, tmp_path / "w.npz", tmp_path / "o.json", "fedavg",
                                    Path("/x/bin/python"))
        assert not any("py-spy" in part for part in cmd)


# -- pfl at the setup its label says ---------------------------------------------------------------------------
def test_pfl_threads_mean_the_threads_in_all_split_over_the_processes(tmp_path):
    opts = peers.PeerOptions()
    cmd = peer_run.peer_command(opts, "pfl", "2x1", tmp_path / "w.npz", tmp_path / "o.json", "fedavg",
                                Path("/x/bin/python"))
    assert cmd[:4] == ["/x/bin/torchrun", "--standalone", "--nproc_per_node", "2"]
    assert cmd[cmd.index("--threads") + 1] == "2"  # 2 in all: 1 in each of the 2 processes
    cmd = peer_run.peer_command(opts, "pfl", "1x2", tmp_path / "w.npz", tmp_path / "o.json", "fedavg",
                                Path("/x/bin/python"))
    assert cmd[0] == "/x/bin/python" and cmd[cmd.index("--threads") + 1] == "2"
    # the script's side: it splits what it is given by torchrun's WORLD_SIZE, as its help says
    script = (REPO / "benchmarks" / "peers" / "pfl_fedavg.py").read_text()
    assert 'torch.set_num_threads(max(1, args.threads // processes))' in script
    help_text = subprocess.run([sys.executable, str(REPO / "benchmarks" / "peers" / "pfl_fedavg.py"), "--help"],
                               capture_output=True, text=True, timeout=120).stdout
    assert "split over the workers" in " ".join(help_text.split())


def _users(rank, world, per_iteration):
    return {"rank": rank, "world": world, "iterations": {str(i): v for i, v in enumerate(per_iteration)}}


def test_each_worker_trains_its_half_of_the_clients_once_per_round_or_the_row_says_not():
    halves = [_users(0, 2, [{"TRAIN": [0, 2, 4, 6], "VAL": [0, 2, 4, 6]}] * 3),
              _users(1, 2, [{"TRAIN": [1, 3, 5, 7], "VAL": [1, 3, 5, 7]}] * 3)]
    split = peer_run.worker_split(halves, 8, 2)
    assert split["ok"] and split["per_worker"] == {"0": [4], "1": [4]} and split["iterations"] == 3
    assert "each of 2 workers trained 4 of 8 clients in every one of 3 central iterations" in split["text"]
    twice = [halves[0], _users(1, 2, [{"TRAIN": [0, 3, 5, 7]}] * 3)]  # client 0 twice, client 1 never
    split = peer_run.worker_split(twice, 8, 2)
    assert not split["ok"] and "7 of 8 clients, 1 more than once" in split["text"]
    assert not peer_run.worker_split(halves[:1], 8, 2)["ok"]  # a worker that recorded nothing
    # the same check on a row: the threads per process too
    row = peers.PeerRow("pfl", "2 processes x 1 thread", "fedavg", 8, 1, 0.2)
    peer_run.check_pfl_setup(row, "2x1", {"setup": {"processes": 2, "torch_threads_per_process": 2}}, [], 8)
    assert row.status.startswith("setup check failed: 2 torch threads per process, not 1")
    assert "0 of 2 workers recorded" in row.status and peer_report.ratios([row], row) == (None, None)


def test_the_new_flags_refuse_bad_values_in_one_line(capsys):
    for argv, fragment in ((["--repetitions", "0"], "--repetitions"), (["--round-budget", "nan"], "--round-budget"),
                           (["--cfl-rounds", "1"], "--cfl-rounds"), (["--busy-above", "-1"], "--busy-above")):
        rc = main(["bench", "--peers", "pfl", *argv])
        err = capsys.readouterr().err
        assert rc != 0 and fragment in err and "Traceback" not in err, (argv, err)
    rc = main(["bench", "--peers", "pfl", "--pfl-setups", "2by1", "--peer-python", sys.executable])
    assert rc == 2 and "not PROCESSESxTHREADS" in capsys.readouterr().err


# -- the real pfl script, where its environment is installed ---------------------------------------------------
PEER_PYTHON = REPO / ".venv-peers" / "bin" / "python"


@pytest.mark.slow
@pytest.mark.skipif(not (REPO / ".venv-peers" / ".installed").exists(), reason="needs .venv-peers (make .venv-peers/.installed)")
def test_pfl_under_torchrun_splits_threads_and_clients_and_stops_every_process_together(tmp_path):
    opts = peers.PeerOptions(rounds=30, round_budget=0.5, time_limit=300, threads=2)
    data = peers.write_workload(tmp_path / "w.npz", peers.build_experiment(peers.workload_config(8, "fedavg", opts)),
                                opts)
    row = peer_run.run_peer(opts, "pfl", "2x1", data, "fedavg", 8, 1, PEER_PYTHON, tmp_path, quiet)
    assert row.status == "ok", row.status
    assert row.setup["processes"] == 2 and row.setup["torch_threads_per_process"] == 1
    split = row.setup["worker_split"]
    assert split["ok"] and split["per_worker"] == {"0": [4], "1": [4]}
    steady, total = (int(v) for v in row.rounds.split(" of "))
    assert steady >= 3 and total < 30  # stopped by the budget after the minimum, both processes at one round
    assert not math.isnan(row.seconds) and row.accuracy_curve


def test_repetitions_combine_into_one_row_with_medians_and_the_rounds_each_took():
    reps = [peers.PeerRow("CFL Lab", "Experiment.step()", "fedavg", 100, 1, s, rounds=f"{n} of {n + 1}",
                          train_seconds=s / 2, other_cpus=load, setup={"wall_seconds": 10.0})
            for s, n, load in ((0.010, 100, 0.01), (0.014, 79, 0.05), (0.012, 100, 0.02))]
    row = peers.combine(reps)
    assert row.seconds == 0.012 and row.train_seconds == 0.006 and row.repetitions == [0.010, 0.014, 0.012]
    assert row.rounds == "79-100 timed x 3 reps"  # counted as numbers, not as text
    assert row.other_cpus == 0.05 and row.rep_other_cpus == [0.01, 0.05, 0.02] and "30 s in all" in row.note
    assert reps[0].repetitions == []  # the repetitions themselves are left as they were


def test_a_saved_run_from_before_the_gate_renders_as_not_quoted_and_never_over_a_quoted_table(tmp_path, capsys):
    rows = [peers.PeerRow("CFL Lab", "Experiment.step()", "fedavg", 100, 1, 0.0078, other_cpus=0.0),
            peers.PeerRow("pfl", "2 processes x 1 thread", "fedavg", 100, 1, 0.333, other_cpus=0.13)]
    facts = {"cpu": "x", "cpu_count": 2, "python": "3", "load_before": "1", "load_after": "1", "other_cpus": 0.1}
    old = peers.PeerReport(facts, peers.PeerOptions(), rows)  # no busy_above: taken before issue 37's gate
    assert not peer_report.is_quoted_report(old)
    saved = tmp_path / "old.json"
    peer_report.write_json(old, saved)
    quoted = tmp_path / "PEERS.md"
    quoted.write_text("# table\n" + peer_report.NOTES_MARKER + "\nnotes\n")
    assert main(["bench", "--peers-from", str(saved), "--out", str(quoted)]) == 2
    assert "holds a quoted table" in capsys.readouterr().err and quoted.read_text().startswith("# table")
    fresh = tmp_path / "old.md"
    assert main(["bench", "--peers-from", str(saved), "--out", str(fresh)]) == 0
    text = fresh.read_text()
    assert peer_report.NOT_QUOTED in text and "Taken before the quiet-machine gate" in text
    # the same rows from a gated run are quoted, unless a repetition was above the mark
    gated = peers.PeerReport({**facts, "busy_above": 0.2}, peers.PeerOptions(), rows)
    assert peer_report.is_quoted_report(gated)
    rows[1].rep_other_cpus = [0.13, 0.31]
    assert not peer_report.is_quoted_report(gated)
