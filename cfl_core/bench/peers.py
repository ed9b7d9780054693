"""The peer benchmark: one FedAvg (and one CLoVE) workload in CFL Lab, Flower and pfl-research.

    python -m cfl_core bench --peers flower,pfl [--sizes 10,100,1000] [--rounds 4] [--peer-python PATH]

The data is built once per size through CFL Lab's public API (`Experiment` on digits with
`sample_with_replacement`), and the very same arrays (and initial models) are written to a
`.npz` that each peer script reads (`benchmarks/peers/*.py`, run as subprocesses with the
peers' interpreter). This module never imports a peer framework: it spawns the scripts and
reads the JSON they write.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .measure import OtherLoad, load_average, machine_facts

REPO = Path(__file__).resolve().parents[2]
PEER_SCRIPTS = {"flower": "benchmarks/peers/flower_fedavg.py", "pfl": "benchmarks/peers/pfl_fedavg.py"}
DEFAULT_PEER_PYTHON = REPO / ".venv-peers" / "bin" / "python"
FEATURES, CLASSES, HIDDEN = 64, 10, 128  # digits 8x8 and the bench's MLP (cfl_core/engine/models.py: MLP)


class PeerEnvironmentMissing(RuntimeError):
    """The peers' interpreter (or a framework in it) is not there: say how to make it."""


@dataclass
class PeerOptions:
    peers: tuple[str, ...] = ("flower", "pfl")
    sizes: tuple[int, ...] = (10, 100, 1000, 10000)
    rounds: int = 4  # rounds in all per row, warm-up included
    warmup: int = 1
    samples: int = 80
    test_samples: int = 40
    lr: float = 0.05
    momentum: float = 0.9  # the bench's MLP workload uses SGD momentum 0.9 (BenchOptions): every framework alike
    batch_size: int = 10
    local_epochs: int = 1
    threads: int = 2
    seed: int = 0
    time_limit: float = 900.0  # seconds per peer row (start-up included); a row past it is stopped
    clove_clients: int = 1000  # the CLoVE row (0 skips it)
    clove_models: int = 4
    flower_cpus: tuple[float, ...] = (1.0, 2.0)  # Flower client resources tried; the fastest is kept
    pfl_setups: tuple[str, ...] = ("1x2", "2x1")  # processes x threads: one process, or torchrun with two
    peer_python: str | None = None
    profile: bool = False  # py-spy of every peer row (where its time goes)
    workdir: str | None = None

    def python(self) -> Path:
        return Path(self.peer_python) if self.peer_python else DEFAULT_PEER_PYTHON


@dataclass
class PeerRow:
    framework: str  # "CFL Lab", "flower", "pfl"
    variant: str  # what exactly ran (engine / Experiment.step() / num_cpus=1 / 2 processes x 1 thread ...)
    algorithm: str
    clients: int
    models: int
    seconds: float | None  # steady-state seconds per round (median)
    train_seconds: float | None = None  # the training + averaging part, where it can be told apart
    eval_seconds: float | None = None
    phases: dict = field(default_factory=dict)  # other parts of a round (loss matrix, clustering, ...)
    rounds: str = ""  # "3 of 4" steady rounds taken
    accuracy: float | None = None  # mean client test accuracy after `accuracy_after` rounds
    accuracy_after: int | None = None
    ari: float | None = None
    startup_seconds: float | None = None
    other_cpus: float | None = None
    status: str = "ok"
    best: bool = True  # the fastest setup of this framework for this row (others are kept as tried)
    includes: str = ""
    versions: dict = field(default_factory=dict)
    setup: dict = field(default_factory=dict)
    profile: dict = field(default_factory=dict)
    note: str = ""

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class PeerReport:
    facts: dict
    options: PeerOptions
    rows: list[PeerRow]
    seconds: float = 0.0


# -- the workload, built through the public API ------------------------------------------------------
def workload_config(clients: int, algorithm: str = "fedavg", opts: PeerOptions | None = None):
    """The ExperimentConfig of a row: digits (64 features, 10 classes), 80 samples per client drawn
    with replacement, the bench's MLP. FedAvg: one IID cluster; CLoVE: 4 rotation clusters."""
    from ..config import ExperimentConfig

    o = opts or PeerOptions()
    clove = algorithm == "clove"
    clusters = 4 if clove else 1
    if clients % clusters:
        raise ValueError(f"{algorithm} needs a multiple of {clusters} clients, got {clients}")
    return ExperimentConfig(
        dataset="digits", partition="feature-skew" if clove else "iid", clusters=clusters,
        clients_per_cluster=clients // clusters, samples_per_client=o.samples,
        test_samples_per_client=o.test_samples, sample_with_replacement=True, algorithm=algorithm,
        models=o.clove_models if clove else None, model="mlp", rounds=max(o.rounds, 1),
        local_epochs=o.local_epochs, batch_size=o.batch_size, lr=o.lr, optimizer="sgd", momentum=o.momentum,
        seed=o.seed, device="cpu",
        # every round clusters (never freezes), and round 0 clusters the initial models' losses as the peers do
        options={"stable_rounds": 1_000_000, "first_assignment": "evaluation"} if clove else {})


def build_experiment(config, out_dir=None, setup=None):
    from ..experiment import Experiment

    return Experiment(config, out_dir=out_dir, setup=setup)


def workload_arrays(experiment) -> dict[str, np.ndarray]:
    """The arrays every framework gets: the experiment's clients and its initial models."""
    fed = experiment.federation
    if int(fed.n_train.min()) != int(fed.n_train.max()) or int(fed.n_test.min()) != int(fed.n_test.max()):
        raise ValueError("the peer workload needs equal client sizes")
    m = fed.num_clients
    return {
        "x_train": fed.x_train.reshape(m, fed.x_train.shape[1], -1).numpy().astype(np.float32),
        "y_train": fed.y_train.numpy().astype(np.int64),
        "x_test": fed.x_test.reshape(m, fed.x_test.shape[1], -1).numpy().astype(np.float32),
        "y_test": fed.y_test.numpy().astype(np.int64),
        "init": experiment.models_snapshot().numpy().astype(np.float32),
        "clusters": experiment.true_clusters.numpy().astype(np.int64),
    }


def write_workload(path: str | Path, experiment, opts: PeerOptions) -> Path:
    arrays = workload_arrays(experiment)
    spec = {"lr": opts.lr, "momentum": opts.momentum, "batch_size": opts.batch_size,
            "local_epochs": opts.local_epochs, "seed": opts.seed, "classes": CLASSES, "hidden": HIDDEN,
            "algorithm": experiment.config.algorithm, "config": experiment.config.to_dict()}
    path = Path(path)
    np.savez(path, workload=np.array(json.dumps(spec)), **arrays)
    return path


# -- CFL Lab's rows ------------------------------------------------------------------------------------
def _median(values):
    return statistics.median(values) if values else None


def cfl_rows(clients: int, opts: PeerOptions, algorithm: str = "fedavg", log: Callable = print,
             workload_path: Path | None = None) -> list[PeerRow]:
    """(a) the bare engine (training + averaging), (b) `Experiment.step()` (the round, per-client
    evaluation and the record), (c) the same with the run folder written; all on the same clients."""
    config = workload_config(clients, algorithm, opts)
    t = time.perf_counter()
    first = build_experiment(config)
    setup_s = time.perf_counter() - t
    if workload_path is not None:
        write_workload(workload_path, first, opts)
    steady = opts.rounds - opts.warmup
    rows = []
    models = int(first.models_snapshot().shape[0])
    from .. import __version__

    versions = {"cfl_core": __version__, "torch": torch.__version__}

    def stepped(variant: str, out_dir, includes: str, exp=None):
        t0 = time.perf_counter()
        exp = exp or build_experiment(config, out_dir, first.setup_data)
        built = setup_s if exp is first else time.perf_counter() - t0
        probe = None
        times, record, phases = [], None, []
        for r in range(opts.rounds):
            if r == opts.warmup:
                probe = OtherLoad()
            t0 = time.perf_counter()
            record = exp.step()
            times.append(time.perf_counter() - t0)
            phases.append(dict(exp.phase_seconds))
        other = probe.cpus() if probe else None
        exp.close()
        split = step_phases(phases[opts.warmup:])
        row = PeerRow("CFL Lab", variant, algorithm, clients, models, _median(times[opts.warmup:]),
                      rounds=f"{steady} of {opts.rounds}", accuracy=record.accuracy, accuracy_after=opts.rounds,
                      ari=record.ari if algorithm == "clove" else None,
                      startup_seconds=built + sum(times[:opts.warmup]),
                      other_cpus=other, includes=includes, versions=versions,
                      setup={"threads": torch.get_num_threads(), "device": "cpu"},
                      train_seconds=split.pop("round", None), eval_seconds=split.pop("evaluation", None),
                      phases=split)
        log(f"  CFL Lab {variant:<28} {algorithm} M={clients:<6} {row.seconds:.4f} s/round  "
            f"acc {record.accuracy:.3f}  other load {other if other is None else round(other, 2)}")
        return row

    rows.append(stepped("Experiment.step()", None,
                        "Experiment.step(): the algorithm's round (training + averaging; CLoVE: loss matrix, "
                        "KMeans, matching too), every client's test evaluation, ARI/NMI and the RoundRecord "
                        "(training part = the round, evaluation = the test evaluation, record = the rest)",
                        exp=first))
    with tempfile.TemporaryDirectory(prefix="cfl-peers-run-") as folder:
        rows.append(stepped("step() + run folder", Path(folder) / "run",
                            "as Experiment.step(), and the round's line appended to rounds.jsonl with fsync, "
                            "and the round's checkpoint"))
    rows.insert(0, engine_row(first, config, opts, algorithm, log, versions))
    return rows


def step_phases(steps: list[dict]) -> dict:
    """Medians over the steady rounds of `Experiment.phase_seconds`: round (training + averaging; its
    median is the row's training part), evaluation, record and, with a run folder, rounds_jsonl and
    checkpoint (the others keyed `<phase>_seconds`, as the table's notes show them)."""
    out = {}
    for name in ("round", "evaluation", "record", "rounds_jsonl", "checkpoint"):
        values = [p[name] for p in steps if name in p]
        if values:
            out[name if name in ("round", "evaluation") else f"{name}_seconds"] = _median(values)
    return out


def engine_row(exp, config, opts: PeerOptions, algorithm: str, log: Callable, versions: dict) -> PeerRow:
    """The bare engine: training + averaging of every client (CLoVE: with the loss matrix and
    clustering), no evaluation and no record."""
    fresh = build_experiment(config, setup=exp.setup_data)
    engine, algo = fresh.engine, fresh.algorithm
    ids = torch.arange(fresh.federation.num_clients)
    times, probe = [], None
    for r in range(opts.rounds):
        if r == opts.warmup:
            probe = OtherLoad()
        t0 = time.perf_counter()
        if algorithm == "fedavg":  # what FedAvg.run_round does, without the outcome it builds
            algo.models, _ = engine.train_and_aggregate(algo.models, ids, torch.zeros(len(ids), dtype=torch.int64), r)
        else:
            algo.run_round(r, ids)
        times.append(time.perf_counter() - t0)
    other = probe.cpus() if probe else None
    what = ("Engine.train_and_aggregate: every client's local SGD (batched) and the weighted average"
            if algorithm == "fedavg" else
            "the CLoVE strategy's run_round on the engine: loss matrix (clients x K), KMeans + matching, "
            "training + per-model averaging; no evaluation, no record")
    row = PeerRow("CFL Lab", "engine (train + average)" if algorithm == "fedavg" else "engine (CLoVE round)",
                  algorithm, len(ids), int(algo.models.shape[0]), _median(times[opts.warmup:]),
                  rounds=f"{opts.rounds - opts.warmup} of {opts.rounds}", other_cpus=other, includes=what,
                  versions=versions, setup={"threads": torch.get_num_threads(), "device": "cpu"})
    log(f"  CFL Lab {row.variant:<28} {algorithm} M={row.clients:<6} {row.seconds:.4f} s/round  "
        f"other load {other if other is None else round(other, 2)}")
    return row


# -- the peers -------------------------------------------------------------------------------------------
def check_peer_environment(opts: PeerOptions) -> Path:
    """The peers' interpreter, or PeerEnvironmentMissing with one line saying how to make it."""
    python = opts.python()
    how = ("make bench-peers creates it (python3 -m venv .venv-peers && .venv-peers/bin/pip install "
           "-r requirements-peers.txt), or pass --peer-python PATH")
    if not python.exists():
        raise PeerEnvironmentMissing(f"the peers' Python {python} does not exist: {how}")
    modules = {"flower": "flwr", "pfl": "pfl"}
    wanted = [modules[p] for p in opts.peers]
    code = ("import importlib.util, sys\n"
            "missing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]\n"
            "print(', '.join(missing), file=sys.stderr)\n"
            "sys.exit(1 if missing else 0)\n")
    try:
        probe = subprocess.run([str(python), "-c", code, *wanted], capture_output=True, text=True, timeout=120)
    except OSError as exc:
        raise PeerEnvironmentMissing(f"the peers' Python {python} does not run ({exc}): {how}") from None
    if probe.returncode != 0:
        missing = (probe.stderr.strip().splitlines() or ["?"])[-1]
        raise PeerEnvironmentMissing(f"the peers' Python {python} lacks {missing}: {how}")
    return python


def _kill_tree(proc: subprocess.Popen) -> None:
    """Stop a peer run and everything it started (Ray's processes live in its session)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def peer_command(opts: PeerOptions, framework: str, variant: str, data: Path, out: Path, algorithm: str,
                 python: Path) -> list[str]:
    script = str(REPO / PEER_SCRIPTS[framework])
    common = ["--data", str(data), "--out", str(out), "--algorithm", algorithm, "--rounds", str(opts.rounds),
              "--warmup", str(opts.warmup), "--time-limit", str(max(1.0, opts.time_limit * 0.8))]
    if framework == "flower":
        return [str(python), script, *common, "--threads", str(opts.threads), "--num-cpus", variant]
    procs, threads = (int(v) for v in variant.split("x"))
    if procs == 1:
        return [str(python), script, *common, "--threads", str(threads)]
    torchrun = Path(python).with_name("torchrun")
    return [str(torchrun), "--standalone", "--nproc_per_node", str(procs), script, *common, "--threads", str(threads)]


def variant_label(framework: str, variant: str) -> str:
    if framework == "flower":
        return f"num_cpus={float(variant):g} per client"
    procs, threads = variant.split("x")
    return f"{procs} process{'es' if procs != '1' else ''} x {threads} thread{'s' if threads != '1' else ''}"


def run_peer(opts: PeerOptions, framework: str, variant: str, data: Path, algorithm: str, clients: int,
             models: int, python: Path, workdir: Path, log: Callable = print) -> PeerRow:
    tag = f"{framework}-{algorithm}-{clients}-{variant}"
    out = workdir / f"{tag}.json"
    cmd = peer_command(opts, framework, variant, data, out, algorithm, python)
    profile_file = workdir / f"{tag}.pyspy.txt"
    for stale in (out, profile_file):  # never read an earlier run's output
        stale.unlink(missing_ok=True)
    if opts.profile:
        spy = Path(python).with_name("py-spy")
        cmd = [str(spy), "record", "--subprocesses", "--rate", "50", "--format", "raw", "--nonblocking",
               "-o", str(profile_file), "--", *cmd]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_DEDUP_LOGS": "0"}
    label = variant_label(framework, variant)
    with open(workdir / f"{tag}.log", "w") as log_file:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=str(REPO),
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=opts.time_limit)
        except subprocess.TimeoutExpired:
            rc = None
        _kill_tree(proc)  # also after a normal exit: a forked helper of the peer may still be running
        wall = time.perf_counter() - t0
    result = json.loads(out.read_text()) if out.exists() else None
    row = row_from_result(framework, label, algorithm, clients, models, result, opts)
    if rc is None:
        row.status = f"stopped at the time limit ({opts.time_limit:.0f} s)"
    elif rc != 0 or not (result or {}).get("finished"):  # py-spy may exit 0 for a failed script
        lines = (workdir / f"{tag}.log").read_text(errors="replace").strip().splitlines()
        tail = [line for line in lines if not line.startswith("py-spy>")][-3:]
        row.status = f"failed (exit {rc}): {' / '.join(tail)[:300]}"
    if row.seconds is None and row.status == "ok":
        row.status = "no steady-state round"
    if opts.profile and profile_file.exists():
        row.profile = summarize_profile(profile_file.read_text(errors="replace"))
    row.note = (row.note + "; " if row.note else "") + f"{wall:.0f} s in all"
    log(f"  {framework:<7} {label:<28} {algorithm} M={clients:<6} "
        f"{'-' if row.seconds is None else f'{row.seconds:.4f}'} s/round  "
        f"acc {'-' if row.accuracy is None else f'{row.accuracy:.3f}'}  other load "
        f"{'-' if row.other_cpus is None else f'{row.other_cpus:.2f}'}  {row.status}")
    return row


def row_from_result(framework: str, label: str, algorithm: str, clients: int, models: int, result: dict | None,
                    opts: PeerOptions) -> PeerRow:
    """A table row from a peer script's JSON (None: the script wrote nothing)."""
    row = PeerRow(framework, label, algorithm, clients, models, None)
    if not result:
        row.status = "no result written"
        return row
    rounds = result.get("rounds") or []
    warm = int(result.get("warmup_rounds", opts.warmup))
    steady = rounds[warm:]
    row.seconds = _median([r["seconds"] for r in steady])
    for key, attr in (("train_seconds", "train_seconds"), ("eval_seconds", "eval_seconds")):
        values = [r[key] for r in steady if r.get(key) is not None]
        setattr(row, attr, _median(values))
    for key in ("loss_matrix_seconds", "clustering_seconds"):
        values = [r[key] for r in steady if r.get(key) is not None]
        if values:
            row.phases[key] = _median(values)
    row.rounds = f"{len(steady)} of {len(rounds)}"
    if rounds:
        last = rounds[-1]
        row.accuracy = last.get("accuracy")
        row.accuracy_after = last.get("accuracy_after_rounds", len(rounds))
        row.ari = last.get("ari", (result.get("ari") or [None])[-1])
    if result.get("final_accuracy") is not None:
        row.accuracy, row.accuracy_after = result["final_accuracy"], result.get("final_accuracy_after")
    if len(rounds) == 1 and warm >= 1:
        row.note = f"only the warm-up round finished ({rounds[0]['seconds']:.1f} s)"
    row.startup_seconds = result.get("startup_seconds")
    row.other_cpus = result.get("other_cpus")
    row.includes = result.get("includes", "")
    row.versions = result.get("versions", {})
    row.setup = result.get("setup", {})
    return row


def _process_label(header: str) -> str:
    """A short name for one of py-spy's `process PID:"command line"` roots."""
    pid = header.split(":", 1)[0].replace("process", "").strip()
    cmd = header.split(":", 1)[-1]
    for marker, role in (("ray::", None), ("torchrun", "torchrun agent"), ("log_monitor", "Ray log monitor"),
                         ("monitor.py", "Ray autoscaler monitor"), ("dashboard", "Ray dashboard agent"),
                         ("runtime_env", "Ray runtime-env agent"), ("default_worker.py", "Ray worker (ClientApp actor)"),
                         ("flower_fedavg.py", "Flower driver (ServerApp + simulation engine)"),
                         ("pfl_fedavg.py", "pfl process")):
        if marker in cmd:
            role = role or "Ray actor " + cmd[cmd.index("ray::"):].split()[0].strip('"')
            return f"{role} (pid {pid})"
    cmd = cmd.strip().strip('"')
    return f"pid {pid}: {cmd[:40]}" if cmd else f"the peer's process (pid {pid})"


def summarize_profile(raw: str, top: int = 8) -> dict:
    """py-spy's raw (folded) stacks -> per process: samples outside imports, the functions holding
    the most of them inclusively (each counted once per stack; frames on nearly every stack, such as
    the script's main, are left out) and the leaf functions (self time)."""
    per_process: dict[str, dict] = {}
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        roots = [i for i, f in enumerate(frames) if f.startswith("process ")]  # nested: parent;child;...
        if roots:
            name, frames = _process_label(frames[roots[-1]]), frames[roots[-1] + 1:]
        else:
            name = "main"
        if any("importlib._bootstrap" in f for f in frames) or not frames:
            continue  # start-up imports: not the rounds
        entry = per_process.setdefault(name, {"samples": 0, "functions": {}, "leaves": {}})
        n = int(count)
        entry["samples"] += n
        for frame in set(frames):
            entry["functions"][frame] = entry["functions"].get(frame, 0) + n
        entry["leaves"][frames[-1]] = entry["leaves"].get(frames[-1], 0) + n
    out = {}
    for name, entry in sorted(per_process.items(), key=lambda kv: -kv[1]["samples"])[:6]:
        total = entry["samples"]
        ranked = sorted(entry["functions"].items(), key=lambda kv: -kv[1])
        shown = [(f, c) for f, c in ranked if c < 0.95 * total and not _trivial(f)][:top]
        leaves = sorted(entry["leaves"].items(), key=lambda kv: -kv[1])[:5]
        out[name] = {"samples": total, "top": [[f, round(c / total, 3)] for f, c in shown],
                     "leaves": [[f, round(c / total, 3)] for f, c in leaves]}
    return out


def _trivial(frame: str) -> bool:
    return frame.startswith(("<module>", "_run_module", "run_module", "_bootstrap", "<lambda>", "_call_with_frames"))


# Peers run in this order within every row, whatever order --peers names them in: pfl first, as the
# faster one, so that Flower's rows (minutes, often stopped at the time limit) never leave a row's pfl
# part unmeasured when a run is cut short (the quiet-machine run of 2026-12-01 lost pfl's CLoVE part so).
PEER_ORDER = ("pfl", "flower")


def peers_in_order(peers) -> list[str]:
    """`peers` in PEER_ORDER (any other name after them, as given)."""
    known = [p for p in PEER_ORDER if p in peers]
    return known + [p for p in peers if p not in PEER_ORDER]


NARROW_ABOVE = 100  # above this many clients only the setup that was fastest at the largest smaller size runs


def setups_to_run(rows: list[PeerRow], framework: str, clients: int, variants: list[str]) -> tuple[list[str], str]:
    """Every setup up to NARROW_ABOVE clients; above, the one that was fastest at the largest smaller
    size of any algorithm (with why), so the large rows are not paid for twice."""
    if clients <= NARROW_ABOVE or len(variants) == 1:
        return variants, ""
    smaller = [r for r in rows if r.framework == framework and r.clients < clients and r.seconds is not None]
    if not smaller:
        return variants, ""
    size = max(r.clients for r in smaller)
    at = [r for r in smaller if r.clients == size and r.algorithm == "fedavg"] or [r for r in smaller if r.clients == size]
    best = min(at, key=lambda r: r.seconds)
    others = ", ".join(f"{r.variant} {r.seconds / best.seconds:.1f}x slower" for r in at if r is not best)
    chosen = [v for v in variants if variant_label(framework, v) == best.variant]
    if not chosen:
        return variants, ""
    return chosen, f"setup: the fastest at M={size}" + (f" ({others})" if others else "")


def _predicted_too_slow(rows: list[PeerRow], framework: str, algorithm: str, clients: int,
                        opts: PeerOptions) -> str | None:
    """Skip a size when the framework's smaller sizes already show it cannot finish in time: the round
    time grown from the last measured size with the growth measured between the last two sizes
    (at least linear in M), times the rounds, plus its start-up."""
    if clients <= NARROW_ABOVE * 10:
        return None  # 10, 100 and 1000 clients always run (the time limit still stops a row)
    done = sorted((r for r in rows if r.framework == framework and r.algorithm == algorithm and r.best
                   and r.clients < clients), key=lambda r: r.clients)
    if not done:
        return None
    last = done[-1]
    if last.seconds is None:
        return f"not run: at M={last.clients} it did not finish ({last.status})"
    exponent, basis = 1.0, "linear scaling"
    timed = [r for r in done if r.seconds]
    if len(timed) >= 2 and timed[-2].clients < last.clients:
        grown = math.log(last.seconds / timed[-2].seconds) / math.log(last.clients / timed[-2].clients)
        if grown > 1:
            exponent, basis = grown, f"time growing as M^{grown:.2f}, measured from M={timed[-2].clients}"
    round_s = last.seconds * (clients / last.clients) ** exponent
    need = round_s * opts.rounds + (last.startup_seconds or 0)
    if need > opts.time_limit:
        return (f"not run: at M={last.clients} a round took {last.seconds:.2f} s, so {opts.rounds} rounds at "
                f"M={clients} need about {need:.0f} s ({basis}), over the {opts.time_limit:.0f} s limit per row")
    return None


def run_peer_benchmark(opts: PeerOptions, log: Callable[[str], None] = print,
                       progress: Callable[["PeerReport"], None] | None = None, command: str = "") -> PeerReport:
    """Every row of the peer table. Raises PeerEnvironmentMissing before any work when the peers'
    interpreter is missing. `progress(report)` is called after every size (the report so far), so a
    run stopped part way keeps its finished rows. Order: FedAvg up to 1000 clients, the CLoVE row,
    then the larger FedAvg sizes; within each, CFL Lab, then the peers in PEER_ORDER (pfl before Flower)."""
    began = time.perf_counter()
    python = check_peer_environment(opts) if opts.peers else None
    threads_before = torch.get_num_threads()
    torch.set_num_threads(opts.threads)
    facts = machine_facts(torch.device("cpu"))
    facts["load_before"] = load_average()
    facts["command"] = command
    whole = OtherLoad()
    workdir = Path(opts.workdir) if opts.workdir else Path(tempfile.mkdtemp(prefix="cfl-peers-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows: list[PeerRow] = []
    plan = [("fedavg", m) for m in sorted(opts.sizes) if m <= 1000]
    if opts.clove_clients:
        plan.append(("clove", opts.clove_clients))
    plan += [("fedavg", m) for m in sorted(opts.sizes) if m > 1000]
    try:
        for algorithm, clients in plan:
            log(f"{algorithm} with M = {clients} clients")
            data = workdir / f"workload-{algorithm}-{clients}.npz"
            cfl = cfl_rows(clients, opts, algorithm, log, workload_path=data)
            rows.extend(cfl)
            models = cfl[0].models
            for framework in peers_in_order(opts.peers):
                skip = _predicted_too_slow(rows, framework, algorithm, clients, opts)
                variants = [str(v) for v in (opts.flower_cpus if framework == "flower" else opts.pfl_setups)]
                if skip:
                    rows.append(PeerRow(framework, "-", algorithm, clients, models, None, status=skip))
                    log(f"  {framework:<7} {skip}")
                    continue
                variants, why = setups_to_run(rows, framework, clients, variants)
                tried = [run_peer(opts, framework, v, data, algorithm, clients, models, python, workdir, log)
                         for v in variants]
                if why:
                    for r in tried:
                        r.note = why + "; " + r.note
                timed = [r for r in tried if r.seconds is not None]
                best = min(timed, key=lambda r: r.seconds) if timed else tried[0]
                for r in tried:
                    r.best = r is best
                rows.extend(tried)
            if not opts.workdir:
                data.unlink(missing_ok=True)
            if progress:
                facts_now = {**facts, "load_after": load_average(), "other_cpus": whole.cpus(),
                             "written_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                             "peer_python": str(python) if python else None, "partial": True}
                progress(PeerReport(facts_now, opts, list(rows), time.perf_counter() - began))
    finally:
        torch.set_num_threads(threads_before)
        if not opts.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    facts["load_after"] = load_average()
    facts["other_cpus"] = whole.cpus()
    facts["peer_python"] = str(python) if python else None
    facts["written_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return PeerReport(facts, opts, rows, time.perf_counter() - began)
