"""The peer benchmark: one FedAvg (and one CLoVE) workload in CFL Lab, Flower and pfl-research.

    python -m cfl_core bench --peers flower,pfl [--sizes 100,1000] [--repetitions 5] [--peer-python PATH]

How a figure is taken so that it holds when someone else measures it:
- every repetition of every framework and setup is a fresh process with its own warm-up round, and the
  frameworks alternate within one run (CFL Lab, pfl, pfl's other setup, CFL Lab, pfl, ...), so a slow
  minute of the machine hits both sides of a ratio; each repetition's ratio is kept and the median quoted;
- the machine must be quiet: before every repetition the other load is read from /proc/stat (waiting up
  to `quiet_wait` seconds), and a repetition during which other processes kept more than `busy_above`
  CPUs busy is taken again once; then the run refuses to write further rows and says so.
  `allow_busy` measures anyway and marks every row as taken on a busy machine (never quoted);
- timed repetitions never run under a profiler: `profile` adds a separate py-spy pass at the end.

The data is built once per size (peer_workload.py); CFL Lab's rows are peer_cfl.py, a peer's
repetition peer_run.py, the report peer_report.py. This module never imports a peer framework.
"""
from __future__ import annotations

import dataclasses
import math
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

from .measure import OtherLoad, load_average, machine_facts
from .peer_cfl import cfl_rows, engine_row, run_cfl_process, step_phases  # noqa: F401 (the module's API)
from .peer_run import (PeerEnvironmentMissing, check_peer_environment, peer_command,  # noqa: F401
                       row_from_result, run_peer, summarize_profile, variant_label, worker_split)
from .peer_workload import (CLASSES, DEFAULT_PEER_PYTHON, FEATURES, HIDDEN, MIN_STEADY_ROUNDS,  # noqa: F401
                            PEER_SCRIPTS, REPO, PeerOptions, PeerReport, PeerRow, build_experiment,
                            workload_arrays, workload_config, write_workload)

# Peers run in this order within every repetition, whatever order --peers names them in: pfl first, as the
# faster one, so that Flower's rows (minutes, often stopped at the time limit) never leave a row's pfl
# part unmeasured when a run is cut short (the quiet-machine run of 2026-12-01 lost pfl's CLoVE part so).
PEER_ORDER = ("pfl", "flower")
NARROW_ABOVE = 1000  # above this many clients (and for CLoVE) only the setup fastest in FedAvg below runs
ALWAYS_RUN_UP_TO = 1000  # sizes up to this always run (the time limit still stops a repetition)


class BusyMachine(RuntimeError):
    """The machine stayed busy: no further row is written."""


def peers_in_order(peers) -> list[str]:
    """`peers` in PEER_ORDER (any other name after them, as given)."""
    known = [p for p in PEER_ORDER if p in peers]
    return known + [p for p in peers if p not in PEER_ORDER]


def setups_to_run(rows: list[PeerRow], framework: str, clients: int, variants: list[str],
                  algorithm: str = "fedavg") -> tuple[list[str], str]:
    """Every setup for FedAvg up to NARROW_ABOVE clients (the others are the table's extra rows); above, and
    for CLoVE, the one that was fastest in FedAvg at the largest size measured (with why), so the long rows
    are not paid for twice."""
    if (algorithm == "fedavg" and clients <= NARROW_ABOVE) or len(variants) == 1:
        return variants, ""
    below = [r for r in rows if r.framework == framework and r.seconds is not None and not r.profiled
             and (r.clients < clients or (algorithm != "fedavg" and r.clients == clients))]
    if not below:
        return variants, ""
    size = max(r.clients for r in below)
    at = [r for r in below if r.clients == size and r.algorithm == "fedavg"] or [r for r in below if r.clients == size]
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
    if clients <= ALWAYS_RUN_UP_TO:
        return None
    done = sorted((r for r in rows if r.framework == framework and r.algorithm == algorithm and r.best
                   and r.clients < clients and not r.profiled), key=lambda r: r.clients)
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
    # the fewest rounds a repetition runs: the budget stops it after MIN_STEADY_ROUNDS, but Flower's FedAvg
    # (Strategy.start) runs all of them
    rounds = opts.rounds if (framework, algorithm) == ("flower", "fedavg") else \
        min(opts.rounds, opts.warmup + MIN_STEADY_ROUNDS)
    need = round_s * rounds + (last.startup_seconds or 0)
    if need > opts.time_limit:
        return (f"not run: at M={last.clients} a round took {last.seconds:.2f} s, so {rounds} rounds at "
                f"M={clients} need about {need:.0f} s ({basis}), over the {opts.time_limit:.0f} s limit per "
                f"repetition")
    return None


# -- the machine must be quiet --------------------------------------------------------------------------
def machine_load(seconds: float = 2.0) -> float | None:
    """CPUs other processes keep busy now: /proc/stat over `seconds` while this process sleeps."""
    probe = OtherLoad()
    time.sleep(seconds)
    return probe.cpus()


def wait_until_quiet(opts: PeerOptions, log: Callable, what: str) -> float | None:
    """The other load once it is at most `busy_above` (waiting up to `quiet_wait` seconds), or BusyMachine.
    With `allow_busy` it is read once and returned whatever it is."""
    deadline = time.monotonic() + opts.quiet_wait
    said = False
    while True:
        load = machine_load(opts.quiet_sample)
        if opts.allow_busy or load is None or load <= opts.busy_above:
            return load
        if time.monotonic() >= deadline:
            raise BusyMachine(f"the machine is busy: other processes kept {load:.2f} CPUs busy before {what} "
                              f"(more than {opts.busy_above:g}) after {opts.quiet_wait:.0f} s of waiting")
        if not said:
            log(f"  waiting for a quiet machine before {what}: other load {load:.2f} CPUs")
            said = True
        time.sleep(min(10.0, max(0.0, deadline - time.monotonic())))


def _worst(rows: list[PeerRow]) -> float | None:
    loads = [r.other_cpus for r in rows if r.other_cpus is not None]
    return max(loads) if loads else None


def repetition(opts: PeerOptions, log: Callable, what: str, run: Callable[[], list[PeerRow]]) -> list[PeerRow]:
    """One repetition on a quiet machine: taken again once when other processes were busy during it;
    BusyMachine when they were again (with `allow_busy`, its rows are marked busy instead)."""
    for attempt in (1, 2):
        wait_until_quiet(opts, log, what)
        rows = run()
        worst = _worst(rows)
        if worst is None or worst <= opts.busy_above:
            return rows
        if opts.allow_busy:
            for r in rows:
                r.busy = True
            return rows
        if attempt == 1:
            log(f"  {what}: other processes kept {worst:.2f} CPUs busy during it; discarded, taken again")
    raise BusyMachine(f"the machine is busy: other processes kept {worst:.2f} CPUs busy during {what} "
                      f"(more than {opts.busy_above:g}), twice")


# -- repetitions into rows ------------------------------------------------------------------------------
def combine(reps: list[PeerRow]) -> PeerRow:
    """One table row from the repetitions of one framework and setup: each repetition's seconds kept (in
    run order, to pair with the other side's), the medians, and the most other load of any."""
    timed = [r for r in reps if r.seconds is not None and r.status == "ok"]
    row = dataclasses.replace(timed[0] if timed else reps[0])
    row.repetitions = [r.seconds if r.status == "ok" else None for r in reps]
    row.rep_other_cpus = [r.other_cpus for r in reps]
    failed = next((f"{r.status} (repetition {i + 1})" for i, r in enumerate(reps) if r.status != "ok"), None)
    row.status = failed or "ok"
    row.busy = any(r.busy for r in reps)
    row.seconds = statistics.median([r.seconds for r in timed]) if timed else None

    def median_of(get):
        values = [v for v in (get(r) for r in timed) if v is not None]
        return statistics.median(values) if values else None

    row.train_seconds = median_of(lambda r: r.train_seconds)
    row.eval_seconds = median_of(lambda r: r.eval_seconds)
    row.startup_seconds = median_of(lambda r: r.startup_seconds)
    row.phases = {k: median_of(lambda r, k=k: r.phases.get(k)) for k in row.phases}
    row.other_cpus = _worst(reps)
    steady = sorted({int(r.rounds.split(" of ")[0]) for r in timed if r.rounds})
    span = f"{steady[0]}-{steady[-1]}" if len(steady) > 1 else str(steady[0] if steady else 0)
    row.rounds = f"{span} timed x {len(reps)} rep{'s' if len(reps) != 1 else ''}"
    wall = sum(r.setup.get("wall_seconds", 0.0) for r in reps)
    row.note = "; ".join(filter(None, [row.note, f"{wall:.0f} s in all" if wall else ""]))
    return row


def _commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (head or "unknown") + (" with uncommitted changes" if dirty else "")


def _measure_size(opts: PeerOptions, algorithm: str, clients: int, rows: list[PeerRow], python, workdir: Path,
                  data: Path, log: Callable) -> list[PeerRow]:
    """Every framework and setup at one size, `repetitions` times, alternating; the combined rows."""
    models = 0  # set from CFL Lab's rows below
    units: list[tuple[str, str]] = [("CFL Lab", "")]
    skipped, whys = [], {}
    for framework in peers_in_order(opts.peers):
        skip = _predicted_too_slow(rows, framework, algorithm, clients, opts)
        if skip:
            skipped.append(PeerRow(framework, "-", algorithm, clients, 0, None, status=skip))
            log(f"  {framework:<7} {skip}")
            continue
        variants = [str(v) for v in (opts.flower_cpus if framework == "flower" else opts.pfl_setups)]
        variants, why = setups_to_run(rows, framework, clients, variants, algorithm)
        units += [(framework, v) for v in variants]
        whys[framework] = why
    reps: dict[tuple[str, str], list[list[PeerRow]]] = {u: [] for u in units}
    for rep in range(opts.repetitions):
        for framework, variant in units:
            done = reps[(framework, variant)]
            if done and any(r.status != "ok" for r in done[-1]):
                continue  # a failed or stopped setup is not run again
            what = (f"{framework} {variant_label(framework, variant) if variant else ''} {algorithm} M={clients} "
                    f"(repetition {rep + 1} of {opts.repetitions})").replace("  ", " ")
            if framework == "CFL Lab":
                got = repetition(opts, log, what, lambda: run_cfl_process(opts, algorithm, clients, workdir, log))
                models = max([models] + [r.models for r in got])
            else:
                got = repetition(opts, log, what, lambda f=framework, v=variant: [
                    run_peer(opts, f, v, data, algorithm, clients, models, python, workdir, log)])
            done.append(got)
    out: list[PeerRow] = []
    cfl = reps[("CFL Lab", "")]
    for variant in [r.variant for r in cfl[0]]:
        out.append(combine([next((r for r in got if r.variant == variant), got[0]) for got in cfl]))
    for framework in peers_in_order(opts.peers):
        tried = [combine([got[0] for got in reps[u]]) for u in units if u[0] == framework and reps[u]]
        for r in tried:
            r.models = models
            if whys.get(framework):
                r.note = "; ".join(filter(None, [whys[framework], r.note]))
        timed = [r for r in tried if r.seconds is not None and r.status == "ok"] or \
            [r for r in tried if r.seconds is not None]  # a setup with a failed repetition only when all have one
        best = min(timed, key=lambda r: r.seconds) if timed else (tried[0] if tried else None)
        for r in tried:
            r.best = r is best
        out.extend(tried)
    for r in skipped:
        r.models = models
    return out + skipped


def profile_pass(opts: PeerOptions, rows: list[PeerRow], plan, python, workdir: Path, log: Callable) -> list[PeerRow]:
    """py-spy over each peer's fastest setup per size, after every timed repetition: where the time goes.
    A few rounds each; the rows are marked profiled and never timed or quoted."""
    short = dataclasses.replace(opts, rounds=min(opts.rounds, opts.warmup + MIN_STEADY_ROUNDS))
    out = []
    log("profile pass (py-spy; these rows explain where time goes and are never timed or quoted)")
    for algorithm, clients in plan:
        data = workdir / f"workload-{algorithm}-{clients}.npz"
        for r in rows:
            if (r.algorithm, r.clients) == (algorithm, clients) and r.framework != "CFL Lab" and r.best \
                    and r.seconds is not None and data.exists():
                variant = next(v for v in [str(x) for x in (opts.flower_cpus if r.framework == "flower"
                                                              else opts.pfl_setups)]
                               if variant_label(r.framework, v) == r.variant)
                row = run_peer(short, r.framework, variant, data, algorithm, clients, r.models, python, workdir,
                               log, profile=True)
                row.best = False
                out.append(row)
    return out


def run_peer_benchmark(opts: PeerOptions, log: Callable[[str], None] = print,
                       progress: Callable[["PeerReport"], None] | None = None, command: str = "") -> PeerReport:
    """Every row of the peer table. Raises PeerEnvironmentMissing before any work when the peers'
    interpreter is missing. `progress(report)` is called after every size (the report so far), so a
    run stopped part way keeps its finished rows. Order: FedAvg up to 1000 clients, the CLoVE row,
    then the larger FedAvg sizes. A busy machine stops the run: the rows not measured say so, and
    `facts["refused"]` says why."""
    began = time.perf_counter()
    python = check_peer_environment(opts) if opts.peers else None
    threads_before = torch.get_num_threads()
    torch.set_num_threads(opts.threads)
    facts = machine_facts(torch.device("cpu"))
    facts.update(load_before=load_average(), command=command, commit=_commit(), allow_busy=opts.allow_busy,
                 busy_above=opts.busy_above)
    whole = OtherLoad()
    workdir = Path(opts.workdir) if opts.workdir else Path(tempfile.mkdtemp(prefix="cfl-peers-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows: list[PeerRow] = []
    plan = [("fedavg", m) for m in sorted(opts.sizes) if m <= 1000]
    if opts.clove_clients:
        plan.append(("clove", opts.clove_clients))
    plan += [("fedavg", m) for m in sorted(opts.sizes) if m > 1000]

    def snapshot(partial: bool) -> PeerReport:
        now = {**facts, "load_after": load_average(), "other_cpus": whole.cpus(),
               "written_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "peer_python": str(python) if python else None}
        if partial:
            now["partial"] = True
        return PeerReport(now, opts, list(rows), time.perf_counter() - began)

    try:
        for i, (algorithm, clients) in enumerate(plan):
            log(f"{algorithm} with M = {clients} clients ({opts.repetitions} repetitions, alternating)")
            data = workdir / f"workload-{algorithm}-{clients}.npz"
            try:
                wait_until_quiet(opts, log, f"building the {algorithm} M={clients} workload")
                write_workload(data, build_experiment(workload_config(clients, algorithm, opts)), opts)
                rows.extend(_measure_size(opts, algorithm, clients, rows, python, workdir, data, log))
            except BusyMachine as exc:
                facts["refused"] = f"{exc}; no row written from {algorithm} M={clients} on"
                log(f"stopped: {facts['refused']}")
                rows.extend(PeerRow("-", "-", a, m, 0, None, status="not measured: the machine was busy")
                            for a, m in plan[i:])
                break
            if progress:
                progress(snapshot(partial=True))
        if opts.profile and python is not None and "refused" not in facts:
            rows.extend(profile_pass(opts, rows, plan, python, workdir, log))
    finally:
        torch.set_num_threads(threads_before)
        if not opts.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return snapshot(partial=False)
