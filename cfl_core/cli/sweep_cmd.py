"""`python -m cfl_core sweep SPEC`: a grid of experiments, resumable, on a local pool or on Ray."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ConfigError
from ..jsonio import read_json
from ..memory import add_memory_flag
from ..sweep.executors import EXECUTORS
from ..sweep.folder import POINT_FILE
from ..sweep.spec import DEFAULT_MAX_POINTS


def add_executor_flags(parser: argparse.ArgumentParser, default_executor: str = "local") -> None:
    parser.add_argument("--executor", choices=EXECUTORS, default=default_executor,
                        help="local: a pool of worker processes here (default); ray: one Ray task per run "
                             "(a local Ray instance, or the cluster at --address); serial: one by one in this process")
    parser.add_argument("--address", help="with --executor ray: an existing cluster, 'auto' (the cluster this "
                                           "machine is a node of) or HOST:PORT (the head's GCS port); a cluster "
                                           "with token authentication: its token in RAY_AUTH_TOKEN (README)")
    parser.add_argument("--workers", type=int, help="runs at once (default: the cores // --cpus-per-run; "
                                                    "with a local Ray instance: its CPUs are workers x cpus-per-run)")
    parser.add_argument("--cpus-per-run", type=int, default=1, dest="cpus_per_run",
                        help="torch threads (and Ray CPUs) per run (default 1). Records depend on it: the same "
                             "point gives identical records in every executor with the same value")
    parser.add_argument("--max-points", type=int, default=DEFAULT_MAX_POINTS, dest="max_points",
                        help=f"refuse a sweep of more points than this (default {DEFAULT_MAX_POINTS})")
    add_memory_flag(parser)


def runs_at_once(args, points: int) -> int:
    """How many runs the executor holds in memory at the same time here (as make_executor sizes its pool)."""
    from ..sweep.executors import cpu_count

    if args.executor == "serial":
        return 1
    workers = args.workers or max(1, cpu_count() // max(1, args.cpus_per_run))
    return max(1, min(workers, points))


class SweepBar:
    """tqdm progress over the sweep's runs: done / running / failed and the ETA."""

    def __init__(self, name: str, stream=None):
        self.name, self.stream = name, stream or sys.stderr
        self.bar = None
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._seen = None

    def __call__(self, progress) -> None:
        from tqdm import tqdm

        if self.bar is None:
            self.bar = tqdm(total=progress.total, initial=progress.skipped, desc=self.name, unit="run",
                            file=self.stream, dynamic_ncols=True, mininterval=0.5, smoothing=0.1)
        ended = progress.skipped + progress.done + progress.failed
        state = (ended, progress.running)
        if not self.tty and state == self._seen:
            return  # a log file gets a line per change, not one per half second
        self._seen = state
        self.bar.set_postfix_str(f"done {progress.done + progress.skipped} running {progress.running} "
                                 f"failed {progress.failed}", refresh=False)
        if ended > self.bar.n:
            self.bar.update(ended - self.bar.n)
        else:
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def resumed_spec(folder: Path):
    """The spec recorded in a sweep folder's sweep.json, to run its points not finished yet (ConfigError naming
    --resume when the folder holds no sweep, or a damaged one). A sweep still going is refused by its lock."""
    from ..run_reader import read_json_object
    from ..sweep import SweepSpec
    from ..sweep.folder import SWEEP_FILE
    from ..sweep.spec_file import check_shape

    if not folder.is_dir():
        raise ConfigError("--resume", str(folder), "a sweep's folder (it is not a folder)")
    sweep, problem = read_json_object(folder / SWEEP_FILE)
    if sweep is None:
        raise ConfigError("--resume", str(folder), f"a sweep's folder with a readable {SWEEP_FILE} "
                                                   f"({problem or 'there is none'})")
    raw = sweep.get("spec")
    if not isinstance(raw, dict):
        raise ConfigError("--resume", str(folder), f"a sweep's folder whose {SWEEP_FILE} holds its spec (it has "
                                                   "none)")
    check_shape(raw, folder / SWEEP_FILE)
    try:
        return SweepSpec.from_dict(raw)
    except ConfigError as exc:
        raise ConfigError("--resume", str(folder), f"a sweep whose recorded spec is valid ({exc})") from None


def run(args) -> int:
    from ..sweep import SweepSpec, plan, run_sweep
    from ..sweep.folder import DONE, FAILED_BEFORE

    if args.resume is not None:
        if args.spec is not None or args.out is not None:
            flag = "SPEC" if args.spec is not None else "--out"
            raise ConfigError(flag, args.spec if args.spec is not None else args.out,
                              "nothing beside --resume DIR: a resumed sweep keeps the spec in DIR/sweep.json")
        spec, out = resumed_spec(Path(args.resume)), Path(args.resume)
    elif args.spec is None:
        raise ConfigError("spec", None, "a sweep spec file (or --resume DIR to finish a sweep)")
    else:
        spec = SweepSpec.from_file(args.spec)
        out = Path(args.out or Path("runs") / "sweeps" / spec.name)
    if args.dry_run:
        expansion, states = plan(spec, out, max_points=args.max_points, skip_invalid=True)
        print(expansion.report())
        finished = sum(s == DONE for s in states.values())
        failed = sum(s == FAILED_BEFORE for s in states.values())
        print(f"{out}: {finished} finished, {failed} failed before, {len(states) - finished - failed} to run")
        return 0
    if args.executor != "ray" or not args.address:  # a cluster's memory is the cluster's to bound
        from .run_cmd import bound_memory

        configs = [p.config for p in spec.expand(max_points=args.max_points).points]
        if configs:
            bound_memory(configs, runs_at_once(args, len(configs)), args.memory_mb)
    bar = SweepBar(spec.name)
    try:
        outcome = run_sweep(spec, out, executor=args.executor, workers=args.workers, cpus_per_run=args.cpus_per_run,
                            address=args.address, max_points=args.max_points, skip_invalid=args.skip_invalid,
                            replace=args.replace, on_progress=bar)
    except KeyboardInterrupt:
        bar.close()
        print(f"interrupted: every finished run is in {out}; the same command resumes", file=sys.stderr)
        return 130
    bar.close()
    print()
    print(outcome.table)
    failed = [p for p in outcome.expansion.points if outcome.statuses[p.key] == "failed"]
    for p in failed[:10]:
        marker = outcome.folder / p.folder / POINT_FILE
        print(f"failed: {p.folder}: {(read_json(marker) or {}).get('error')}", file=sys.stderr)
    print(f"{len(outcome.expansion.points)} points ({outcome.progress.skipped} already finished, "
          f"{outcome.progress.done} run now, {outcome.failed} failed) -> {out}/results.csv, {out}/summary.md")
    return 1 if failed else 0


def register(sub) -> None:
    parser = sub.add_parser("sweep", help="run a grid of experiments from a spec (resumable; local pool or Ray)",
                            description="Run every point of a sweep spec (JSON or YAML: base, grid, zip, cases, "
                                        "options, folder; see cfl_core/sweep/spec.py) and write one run folder "
                                        "per point, results.csv and summary.md. Re-running the same command "
                                        "skips the finished points.")
    parser.add_argument("spec", nargs="?", help="the sweep spec (.json, .yaml or .yml)")
    parser.add_argument("--out", help="the sweep folder (default: runs/sweeps/NAME)")
    parser.add_argument("--resume", metavar="DIR", help="finish the sweep in DIR (its spec from DIR/sweep.json): "
                                                        "the points not finished yet run; refused while another "
                                                        "driver (a terminal, the dashboard) is at work on it")
    add_executor_flags(parser)
    parser.add_argument("--skip-invalid", action="store_true", dest="skip_invalid",
                        help="run the valid points when some combinations cannot work (they are listed either way)")
    parser.add_argument("--replace", action="store_true",
                        help="overwrite run folders that hold another config than the spec's point at that path")
    parser.add_argument("--dry-run", action="store_true", dest="dry_run",
                        help="list invalid points and what would run; run nothing")
    parser.set_defaults(func=run)
