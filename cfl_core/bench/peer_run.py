"""One repetition of a peer: its script run as a subprocess with the peers' interpreter, read back as a row.

Timed repetitions never run under a profiler; `run_peer(..., profile=True)` is the separate
py-spy pass whose rows only say where the time goes (marked `profiled`, never quoted).
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import time
from pathlib import Path
from typing import Callable

from .peer_workload import MIN_STEADY_ROUNDS, PEER_SCRIPTS, REPO, PeerOptions, PeerRow


class PeerEnvironmentMissing(RuntimeError):
    """The peers' interpreter (or a framework in it) is not there: say how to make it."""


def _median(values):
    return statistics.median(values) if values else None


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


def setup_of(variant: str) -> tuple[int, int]:
    """(processes, threads per process) of a pfl setup written PROCESSESxTHREADS."""
    procs, threads = (int(v) for v in variant.split("x"))
    return procs, threads


def peer_command(opts: PeerOptions, framework: str, variant: str, data: Path, out: Path, algorithm: str,
                 python: Path) -> list[str]:
    """The peer script's command line. `--threads` is the threads in all, which the script splits over
    its workers (pfl: processes x threads; Flower: actors x num_cpus)."""
    script = str(REPO / PEER_SCRIPTS[framework])
    stop_after = min(opts.round_budget, max(1.0, opts.time_limit * 0.8))
    common = ["--data", str(data), "--out", str(out), "--algorithm", algorithm, "--rounds", str(opts.rounds),
              "--warmup", str(opts.warmup), "--time-limit", f"{stop_after:g}",
              "--min-rounds", str(min(opts.rounds, opts.warmup + MIN_STEADY_ROUNDS))]
    if framework == "flower":
        return [str(python), script, *common, "--threads", str(opts.threads), "--num-cpus", variant]
    procs, threads = setup_of(variant)
    if procs == 1:
        return [str(python), script, *common, "--threads", str(threads)]
    torchrun = Path(python).with_name("torchrun")
    return [str(torchrun), "--standalone", "--nproc_per_node", str(procs), script, *common,
            "--threads", str(procs * threads)]


def variant_label(framework: str, variant: str) -> str:
    if framework == "flower":
        return f"num_cpus={float(variant):g} per client"
    procs, threads = variant.split("x")
    return f"{procs} process{'es' if procs != '1' else ''} x {threads} thread{'s' if threads != '1' else ''}"


def users_files(out: Path) -> list[Path]:
    """The per-worker files a pfl run leaves beside its result: which users each worker simulated."""
    return sorted(out.parent.glob(out.name + ".users.rank*.json"))


def run_peer(opts: PeerOptions, framework: str, variant: str, data: Path, algorithm: str, clients: int,
             models: int, python: Path, workdir: Path, log: Callable = print, *, profile: bool = False) -> PeerRow:
    """One repetition of a peer in a fresh process. With `profile`, the same run under py-spy: the row is
    marked profiled and only its profile is of use."""
    tag = f"{framework}-{algorithm}-{clients}-{variant}" + ("-profiled" if profile else "")
    out = workdir / f"{tag}.json"
    cmd = peer_command(opts, framework, variant, data, out, algorithm, python)
    profile_file = workdir / f"{tag}.pyspy.txt"
    for stale in (out, profile_file, *users_files(out)):  # never read an earlier run's output
        stale.unlink(missing_ok=True)
    if profile:
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
    row.profiled = profile
    if rc is None:
        row.status = f"stopped at the time limit ({opts.time_limit:.0f} s)"
    elif rc != 0 or not (result or {}).get("finished"):  # py-spy may exit 0 for a failed script
        lines = (workdir / f"{tag}.log").read_text(errors="replace").strip().splitlines()
        tail = [line for line in lines if not line.startswith("py-spy>")][-3:]
        row.status = f"failed (exit {rc}): {' / '.join(tail)[:300]}"
    if row.seconds is None and row.status == "ok":
        row.status = "no steady-state round"
    if framework == "pfl" and result:
        check_pfl_setup(row, variant, result, users_files(out), clients)
    if profile and profile_file.exists():
        row.profile = summarize_profile(profile_file.read_text(errors="replace"))
    row.setup["wall_seconds"] = round(wall, 1)
    if profile:
        row.note = "; ".join(filter(None, [row.note, "under py-spy: its times are slowed by the profiler and "
                                                      "never quoted", f"{wall:.0f} s in all"]))
    log(f"  {framework:<7} {label:<28} {algorithm} M={clients:<6} "
        f"{'-' if row.seconds is None else f'{row.seconds:.4f}'} s/round  "
        f"acc {'-' if row.accuracy is None else f'{row.accuracy:.3f}'}  other load "
        f"{'-' if row.other_cpus is None else f'{row.other_cpus:.2f}'}  {row.status}"
        + ("  (profiled: not timed)" if profile else ""))
    return row


def check_pfl_setup(row: PeerRow, variant: str, result: dict, users: list[Path], clients: int) -> None:
    """A pfl row is what its label says: the workers and threads per worker asked for, and every worker
    trained its share of the clients, each client once per central iteration. Otherwise its status says so."""
    procs, threads = setup_of(variant)
    setup = result.get("setup") or {}
    problems = []
    if setup.get("processes") not in (None, procs):
        problems.append(f"{setup.get('processes')} processes, not {procs}")
    if setup.get("torch_threads_per_process") not in (None, threads):
        problems.append(f"{setup.get('torch_threads_per_process')} torch threads per process, not {threads}")
    split = worker_split([json.loads(p.read_text()) for p in users], clients, procs)
    row.setup["worker_split"] = split
    if not split["ok"]:
        problems.append(split["text"])
    if problems and row.status == "ok":
        row.status = "setup check failed: " + "; ".join(problems)


def worker_split(per_rank: list[dict], clients: int, workers: int) -> dict:
    """From each worker's record of the users it simulated per central iteration and population: did the
    workers together train (and evaluate) every client exactly once in every iteration, and how many each?"""
    if len(per_rank) != workers:
        return {"ok": False, "text": f"{len(per_rank)} of {workers} workers recorded their users"}
    iterations = sorted({int(i) for doc in per_rank for i in doc.get("iterations", {})})
    if not iterations:
        return {"ok": False, "text": "no worker recorded a central iteration"}
    counts = {int(doc["rank"]): [] for doc in per_rank}
    for it in iterations:
        for population in ("TRAIN", "VAL"):
            seen = [u for doc in per_rank for u in doc.get("iterations", {}).get(str(it), {}).get(population, [])]
            if population == "VAL" and not seen:
                continue  # an iteration without evaluation (CLoVE's training half)
            if sorted(seen) != list(range(clients)):
                twice = len(seen) - len(set(seen))
                return {"ok": False, "text": f"central iteration {it}, {population}: {len(set(seen))} of {clients} "
                                             f"clients, {twice} more than once"}
        for doc in per_rank:
            counts[int(doc["rank"])].append(len(doc.get("iterations", {}).get(str(it), {}).get("TRAIN", [])))
    shares = sorted({c for per in counts.values() for c in per})
    each = " or ".join(str(c) for c in shares)
    text = (f"each of {workers} workers trained {each} of {clients} clients in every one of {len(iterations)} "
            f"central iterations, every client once" if workers > 1 else
            f"1 worker trained all {clients} clients once in each of {len(iterations)} central iterations")
    return {"ok": True, "text": text, "per_worker": {str(k): sorted(set(v)) for k, v in counts.items()},
            "iterations": len(iterations)}


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
    curve = {}
    for i, r in enumerate(rounds):
        if r.get("accuracy") is not None:  # pfl says after how many rounds; Flower evaluates after each round
            curve[int(r.get("accuracy_after_rounds", i + 1))] = r["accuracy"]
    if rounds:
        last = rounds[-1]
        row.accuracy = last.get("accuracy")
        row.accuracy_after = last.get("accuracy_after_rounds", len(rounds))
        row.ari = last.get("ari", (result.get("ari") or [None])[-1])
    if result.get("final_accuracy") is not None:
        row.accuracy, row.accuracy_after = result["final_accuracy"], result.get("final_accuracy_after")
        curve[int(row.accuracy_after or len(rounds))] = row.accuracy
    row.accuracy_curve = [[k, v] for k, v in sorted(curve.items())]
    if len(rounds) == 1 and warm >= 1:
        row.note = f"only the warm-up round finished ({rounds[0]['seconds']:.1f} s)"
    row.startup_seconds = result.get("startup_seconds")
    row.other_cpus = result.get("other_cpus")
    row.includes = result.get("includes", "")
    row.versions = result.get("versions", {})
    row.setup = dict(result.get("setup", {}))
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
