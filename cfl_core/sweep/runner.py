"""Running a sweep: expand and check every point, skip the finished ones, run the rest, write the tables.

    outcome = run_sweep(SweepSpec.from_file("sweeps/digits-core.yaml"), "runs/sweeps/digits-core")

Resumable and idempotent: a point whose run folder holds its key with status finished is skipped;
every other point runs (again). Each result is written by the driver (folder.py) the moment it
comes back, so a sweep killed at any moment loses no finished run, and re-running the same
command finishes the rest without running a finished point twice. A failed run is recorded with
its error; the others go on.
"""
from __future__ import annotations

import os
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import __version__
from ..errors import ConfigError
from ..jsonio import write_text_atomic
from ..records import FAILED, FINISHED
from ..run_reader import read_json_object
from .executors import Executor, check_executor, make_executor
from .folder import DONE, FAILED_BEFORE, MISSING, OTHER, RESULTS_FILE, SUMMARY_FILE, SWEEP_FILE, SweepFolder
from .spec import DEFAULT_MAX_POINTS, Expansion, SweepSpec
from .tables import parse_results, protocols_of, results_csv, row_of, summary_markdown, summary_table


class InvalidPoints(ConfigError):
    """Some points cannot run: the report lists each with its error, and the count of valid points."""

    def __init__(self, expansion: Expansion):
        self.expansion = expansion
        super().__init__("points", f"{len(expansion.invalid)} invalid",
                         f"only valid combinations (pass --skip-invalid to run the valid ones):\n"
                         + expansion.report())


@dataclass
class Progress:
    total: int
    skipped: int = 0
    done: int = 0  # finished in this session
    failed: int = 0
    running: int = 0
    started: float = field(default_factory=time.time)
    walls: list = field(default_factory=list)
    slots: int = 1
    last: dict | None = None  # the last result's marker

    @property
    def pending(self) -> int:
        return self.total - self.skipped - self.done - self.failed - self.running

    @property
    def eta_seconds(self) -> float | None:
        if not self.walls:
            return None
        per_run = sum(self.walls) / len(self.walls)
        return per_run * (self.pending + self.running) / max(1, self.slots)

    def as_dict(self) -> dict:
        return {"total": self.total, "skipped": self.skipped, "done": self.done, "failed": self.failed,
                "running": self.running, "pending": self.pending, "started_at": self.started,
                "eta_seconds": self.eta_seconds}


@dataclass
class SweepOutcome:
    spec: SweepSpec
    folder: Path
    expansion: Expansion
    progress: Progress
    statuses: dict[str, str]
    summaries: dict[str, dict | None]
    table: str

    @property
    def failed(self) -> int:
        return sum(1 for s in self.statuses.values() if s == FAILED)


def _command() -> str:
    argv = list(sys.argv)
    if argv and argv[0].endswith("__main__.py") and Path(argv[0]).parent.name == "cfl_core":
        argv = ["python", "-m", "cfl_core", *argv[1:]]
    return shlex.join(argv)


def plan(spec: SweepSpec, out: str | Path, *, max_points: int | None = DEFAULT_MAX_POINTS,
         skip_invalid: bool = False) -> tuple[Expansion, dict[str, str]]:
    """Every point and the state of its folder, checked before anything runs (nothing is written)."""
    expansion = spec.expand(max_points)
    if expansion.invalid and not skip_invalid:
        raise InvalidPoints(expansion)
    if not expansion.points:
        raise ConfigError("points", 0, "at least one valid point\n" + expansion.report())
    folder = SweepFolder(out)
    return expansion, {p.key: folder.state(p) for p in expansion.points}


def run_sweep(spec: SweepSpec, out: str | Path, *, executor: "str | Executor" = "local", workers: int | None = None,
              cpus_per_run: int = 1, address: str | None = None, max_points: int | None = DEFAULT_MAX_POINTS,
              skip_invalid: bool = False, replace: bool = False, command: str | None = None,
              on_progress: Callable[[Progress], None] | None = None) -> SweepOutcome:
    """Run the points not finished yet. `executor` is a name (made here, closed at the end) or an Executor the
    caller keeps (a server's warm pool: used, never closed here; workers and address are then its own).
    on_progress is called about twice a second from this thread; an exception it raises stops the sweep
    (the runs in flight are cancelled, every finished one stays)."""
    if not isinstance(executor, Executor):  # a bad executor or an unreachable cluster: said before anything is written
        address = check_executor(executor, workers=workers, threads=cpus_per_run, address=address, reach=True)
    expansion, states = plan(spec, out, max_points=max_points, skip_invalid=skip_invalid)
    points = expansion.points
    folder = SweepFolder(out)
    check_out(folder, spec, points, states, replace)
    folder.lock()
    try:
        folder.clean()
        states = {p.key: folder.state(p) for p in points}  # again, under the lock: another driver may have
        check_out(folder, spec, points, states, replace)   # written this folder since we looked
        todo = [p for p in points if states[p.key] != DONE]
        for p in points:
            if states[p.key] == DONE:
                folder.drop_partial(p)  # a driver killed between a run's folder and dropping its checkpoints
        command = command or _command()
        progress = Progress(total=len(points), skipped=len(points) - len(todo))
        given = executor if isinstance(executor, Executor) else None
        name = given.name if given is not None else executor
        if given is not None:
            cpus_per_run = getattr(given, "threads", cpus_per_run)
        info: dict = {"executor": name, "threads": cpus_per_run}
        folder.write_sweep({
            "name": spec.name, "description": spec.description, "spec": spec.raw, "command": command,
            "swept": spec.swept, "cfl_core_version": __version__, "written_at": time.time(),
            "points": [{"index": p.index, "key": p.key, "folder": p.folder, "values": p.values} for p in points],
            "invalid": [{"index": p.index, "values": p.values, "error": p.error} for p in expansion.invalid],
            "threads_per_run": cpus_per_run,
        })
        folder.event("start", points=len(points), todo=len(todo), skipped=progress.skipped, command=command,
                     executor=name)
        state = "finished"
        try:
            if todo and given is not None:
                info = given.describe()
                progress.slots = given.slots
                _drive(given, todo, folder, progress, cpus_per_run, info, on_progress)
            elif todo:
                with make_executor(executor, workers=workers, threads=cpus_per_run, address=address,
                                   points=len(todo)) as ex:
                    info = ex.describe()
                    progress.slots = ex.slots
                    _drive(ex, todo, folder, progress, cpus_per_run, info, on_progress)
        except BaseException:
            state = "interrupted"
            raise
        finally:
            folder.clean()
            statuses, summaries = _read_back(folder, points)
            folder.write_progress({**progress.as_dict(), "state": state, "executor": info})
            table = _write_tables(spec, folder, points, statuses, summaries, command)
            folder.event("end", state=state, done=progress.done, failed=progress.failed)
        if on_progress:
            on_progress(progress)
        return SweepOutcome(spec, folder.root, expansion, progress, statuses, summaries, table)
    finally:
        folder.unlock()


def check_out(folder: SweepFolder, spec: SweepSpec, points, states: dict, replace: bool) -> None:
    """ConfigError naming --out unless the folder is new, or this sweep's own (a sweep.json of the same name),
    and its run folders hold these points or nothing; --replace lets the sweep write over another's. A
    folder's files a sweep writes (results.csv, summary.md) are never overwritten where no sweep wrote them."""
    if replace:
        return
    out = str(folder.root)
    sweep, problem = read_json_object(folder.root / SWEEP_FILE)
    if problem:
        raise ConfigError("out", out, f"a sweep's folder whose {SWEEP_FILE} can be read ({problem}); pass "
                                      "--replace to write over it, or choose another --out")
    if sweep is not None and sweep.get("name") != spec.name:
        other = str(sweep.get("name"))[:80]
        raise ConfigError("out", out, f"the folder of sweep {spec.name!r} or a new one: it holds sweep {other!r} "
                                      "(choose another --out, or pass --replace)")
    if sweep is None:
        taken = [name for name in (RESULTS_FILE, SUMMARY_FILE) if os.path.lexists(folder.root / name)]
        if taken:
            raise ConfigError("out", out, f"a new folder or a sweep's: it holds {taken[0]} but no {SWEEP_FILE} "
                                          "(a sweep would overwrite it; choose another --out, or pass --replace)")
    others = [p for p in points if states[p.key] == OTHER]
    if others:
        raise ConfigError("out", out, f"a folder whose run folders hold these points or none: "
                                      f"{others[0].folder} holds another run ({len(others)} such folders; "
                                      f"pass --replace to overwrite them, or choose another --out)")


# a run in flight checkpoints this often (seconds) when the workers share the sweep folder's machine: a sweep
# stopped part way loses at most this much of each run; each checkpoint costs milliseconds, most of a small round
PARTIAL_SAVE_EVERY_S = 30.0


def _drive(ex, todo, folder: SweepFolder, progress: Progress, threads: int, info: dict, on_progress) -> None:
    queue = list(todo)
    inflight: dict = {}
    try:
        while queue or inflight:
            while queue and len(inflight) < ex.slots:
                point = queue.pop(0)
                task = {"key": point.key, "config": point.config.to_dict(), "threads": threads}
                partial = folder.partial(point) if getattr(ex, "shares_files", False) else None
                if partial is not None:
                    task.update(partial=os.path.abspath(partial), save_every=PARTIAL_SAVE_EVERY_S)
                inflight[ex.submit(task)] = point
                folder.event("started", key=point.key, folder=point.folder)
                progress.running += 1
            folder.write_progress({**progress.as_dict(), "state": "running", "executor": info})
            if on_progress:
                on_progress(progress)
            for handle, result in ex.wait(list(inflight), timeout=0.5):
                point = inflight.pop(handle)
                marker = folder.write_run(point, result, {"executor": info.get("executor")})
                folder.drop_partial(point)  # finished or failed, the run folder now holds it
                folder.event("finished" if result["status"] == FINISHED else "failed", key=point.key,
                             run_id=marker["run_id"], error=result.get("error"))
                progress.running -= 1
                if result["status"] == FINISHED:
                    progress.done += 1
                else:
                    progress.failed += 1
                if result.get("wall_seconds") is not None:
                    progress.walls.append(result["wall_seconds"])
                progress.last = marker
    except BaseException:
        ex.cancel()
        raise


def _read_back(folder: SweepFolder, points) -> tuple[dict, dict]:
    statuses, summaries = {}, {}
    for p in points:
        state = folder.state(p)
        statuses[p.key] = {DONE: FINISHED, FAILED_BEFORE: FAILED, MISSING: "missing", OTHER: "missing"}[state]
        summaries[p.key] = folder.summary(p) if state in (DONE, FAILED_BEFORE) else None
    return statuses, summaries


def _rows(folder: SweepFolder, points, statuses, summaries) -> list[dict]:
    rows = [row_of(p, folder.marker(p) if statuses[p.key] != "missing" else None, summaries[p.key]) for p in points]
    for row, p in zip(rows, points):
        row["status"] = statuses[p.key]
    return rows


def rows_now(spec: SweepSpec, out: str | Path, max_points: int | None = DEFAULT_MAX_POINTS
             ) -> tuple[list[dict], list[str]]:
    """(results.csv's rows as the folder `out` holds them now, what is wrong in them), read without its lock and
    writing nothing: a sweep still running, or stopped part way, gives its finished runs and "missing" for the
    others (a run in flight included); a folder not made yet gives every point "missing". The rows are those
    results.csv would hold, read back as results.csv is (values as text, measures as numbers): a run whose
    summary.json gives a measure that is not a number has it left out, and named."""
    points = spec.expand(max_points).points
    folder = SweepFolder(out)
    rows = _rows(folder, points, *_read_back(folder, points))
    parsed, problems = parse_results(results_csv(spec.swept, rows))
    line = re.compile(r"^results\.csv line (\d+): ")

    def named(problem: str) -> str:  # "results.csv line 3" is the second point: say which run it is
        m = line.match(problem)
        index = int(m.group(1)) - 2 if m else -1
        return f"{points[index].folder}/summary.json: {problem[m.end():]}" if 0 <= index < len(points) else problem

    return parsed, [named(p) for p in problems]


def _write_tables(spec: SweepSpec, folder: SweepFolder, points, statuses, summaries, command: str) -> str:
    rows = _rows(folder, points, statuses, summaries)
    _write_text(folder.root / RESULTS_FILE, results_csv(spec.swept, rows))
    table, notes = summary_table(spec.swept, points, summaries, statuses)
    counts = {"points": len(points), "finished": sum(s == FINISHED for s in statuses.values()),
              "failed": sum(s == FAILED for s in statuses.values()),
              "missing": sum(s == "missing" for s in statuses.values())}
    text = summary_markdown(spec.name, spec.description, command, table, notes, counts,
                            protocols_of(points, summaries))
    _write_text(folder.root / SUMMARY_FILE, text)
    return table


def _write_text(path: Path, text: str) -> None:
    """Readers (the dashboard) never see half a table: a new hidden temporary file renamed over it."""
    write_text_atomic(path, text)
