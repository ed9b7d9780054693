"""Reading sweep folders back (the dashboard's Sweeps page, `sweep --resume`, the README's tables): progress,
whether a driver is at work, and what is damaged.

`sweep_status(folder)` never writes, never waits and never raises for what the folder holds. A
sweep is `running` while a driver holds its `.lock` (flock: released by the kernel when the driver
exits or is killed), `interrupted` when its last progress says it was running but no driver holds
the lock, and `finished` otherwise. Whatever cannot be read (a `sweep.json` whose points are not
points, a `progress.json` that is a list or not UTF-8, a `results.csv` with `final_ari=abc`, a
named pipe in place of any file, a missing or truncated file) is listed in `problems`, one line
each, and the rest is read as far as it goes: such a sweep is *damaged*, and nothing else is.
`load_sweep(folder)` adds the results table's rows.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..files import TABLE_LIMIT, open_regular, read_text
from ..run_reader import read_json_object
from .folder import LOCK_FILE, POINT_FILE, PROGRESS_FILE, RESULTS_FILE, SWEEP_FILE
from .tables import parse_results, safe_run_folder

RUNNING, INTERRUPTED, FINISHED = "running", "interrupted", "finished"
DAMAGED = "damaged"
MARKERS = (SWEEP_FILE, PROGRESS_FILE)  # a folder holding either is a sweep folder (damaged without sweep.json)


def lock_state(folder: str | os.PathLike) -> tuple[bool, str | None]:
    """(whether a sweep driver holds the folder's lock, what is wrong with the lock file or None)."""
    import fcntl

    fd, _, problem = open_regular(Path(folder) / LOCK_FILE)  # a named pipe would block an ordinary open
    if fd is None:
        return False, problem
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True, None
    except OSError:
        return False, None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False, None
    finally:
        os.close(fd)


def driver_active(folder: str | os.PathLike) -> bool:
    """True while a sweep driver holds the folder's lock."""
    return lock_state(folder)[0]


@dataclass
class SweepStatus:
    folder: Path
    name: str
    command: str
    points: int
    finished: int
    failed: int
    running: int
    state: str
    swept: list
    eta_seconds: float | None
    description: str = ""
    problems: list[str] = field(default_factory=list)  # what is damaged, one line each (shown as literal text)

    @property
    def pending(self) -> int:
        return self.points - self.finished - self.failed - self.running

    @property
    def damaged(self) -> bool:
        return bool(self.problems)

    @property
    def listed_state(self) -> str:
        """The state a listing shows: damaged (with the reason) whenever something could not be read, unless a
        driver is at work on it right now."""
        return DAMAGED if self.problems and self.state != RUNNING else self.state


def sweep_points(sweep: dict) -> tuple[list[dict], str | None]:
    """The points of a sweep.json object as {index, key, folder, values}, or ([], what is wrong with them)."""
    points = sweep.get("points")
    if not isinstance(points, list):
        return [], f"{SWEEP_FILE}: 'points' is not a list"
    out = []
    for i, p in enumerate(points):
        if not isinstance(p, dict) or not isinstance(p.get("key"), str) or not safe_run_folder(p.get("folder")):
            return [], (f"{SWEEP_FILE}: points[{i}] is not a point (an object with a key and a run folder inside "
                        "the sweep)")
        values = p.get("values") if isinstance(p.get("values"), dict) else {}
        out.append({"index": p.get("index", i), "key": p["key"], "folder": p["folder"], "values": values})
    return out, None


def _text(value, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _count(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def sweep_status(folder: str | os.PathLike) -> SweepStatus | None:
    """The sweep in `folder` (None when it holds neither sweep.json nor progress.json); counts read from the run
    folders; anything damaged in `problems`."""
    folder = Path(folder)
    if not any(os.path.lexists(folder / m) for m in MARKERS):
        return None
    problems: list[str] = []
    sweep, problem = read_json_object(folder / SWEEP_FILE)
    if sweep is None:
        problems.append(problem or f"{SWEEP_FILE} is missing")
        sweep = {}
    points, problem = sweep_points(sweep) if sweep else ([], None)
    if problem:
        problems.append(problem)
    finished = failed = 0
    for point in points:
        marker, _ = read_json_object(folder / point["folder"] / POINT_FILE)
        if isinstance(marker, dict) and marker.get("key") == point["key"]:
            if marker.get("status") == "finished":
                finished += 1
            else:
                failed += 1
    progress, problem = read_json_object(folder / PROGRESS_FILE)
    if problem:
        problems.append(problem)
    progress = progress or {}
    active, problem = lock_state(folder)
    if problem:
        problems.append(problem)
    if active:
        state = RUNNING
    elif progress.get("state") in ("running", "interrupted"):
        state = INTERRUPTED
    else:
        state = FINISHED
    problems += _results_problems(folder, state, len(points))
    running = _count(progress.get("running")) if active else 0
    eta = progress.get("eta_seconds")
    eta = eta if active and isinstance(eta, (int, float)) and not isinstance(eta, bool) else None
    swept = sweep.get("swept")
    return SweepStatus(folder, _text(sweep.get("name"), folder.name) or folder.name, _text(sweep.get("command")),
                       len(points), finished, failed, running, state,
                       [s for s in swept if isinstance(s, str)] if isinstance(swept, list) else [], eta,
                       _text(sweep.get("description")), problems)


_results_cache: dict = {}  # results.csv path -> ((mtime, size), problems): the listing reads every sweep's
_results_lock = threading.Lock()


def read_results_file(folder: str | os.PathLike) -> tuple[list[dict] | None, list[str]]:
    """(results.csv's rows, problems); None for the rows when there is no results.csv (problems say why if it
    is there but cannot be read)."""
    text, problem = read_text(Path(folder) / RESULTS_FILE, TABLE_LIMIT)
    if text is None:
        return None, [problem] if problem else []
    return parse_results(text)


def _results_problems(folder: Path, state: str, points: int) -> list[str]:
    path = folder / RESULTS_FILE
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return [f"{RESULTS_FILE} is missing"] if state == FINISHED and points else []
    except OSError as exc:
        return [f"{RESULTS_FILE} cannot be read ({exc.strerror})"]
    stamp = (st.st_mtime_ns, st.st_size, st.st_mode)
    with _results_lock:
        hit = _results_cache.get(str(path))
    if hit is not None and hit[0] == stamp:
        return list(hit[1])
    _, problems = read_results_file(folder)
    with _results_lock:
        if len(_results_cache) > 256:
            _results_cache.clear()
        _results_cache[str(path)] = (stamp, problems)
    return list(problems)


@dataclass
class SavedSweep:
    """A sweep folder read back: its status (with every problem), its points and its results table's rows."""

    status: SweepStatus
    points: list[dict]
    results: list[dict] | None  # None: no results.csv yet

    @property
    def problems(self) -> list[str]:
        return self.status.problems


def load_sweep(folder: str | os.PathLike) -> SavedSweep | None:
    """The sweep in `folder` read whole (None when it is not a sweep folder); never raises for what it holds."""
    status = sweep_status(folder)
    if status is None:
        return None
    sweep, _ = read_json_object(Path(folder) / SWEEP_FILE)
    points, _ = sweep_points(sweep) if sweep else ([], None)
    rows, _ = read_results_file(folder)
    return SavedSweep(status, points, rows)


def list_sweeps(root: str | os.PathLike, max_depth: int = 4) -> list[SweepStatus]:
    """Every sweep folder under root (at most max_depth levels down), damaged ones included, newest first."""
    root = Path(root)
    found = []
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        status = sweep_status(folder)
        if status is not None:
            found.append(status)
            continue  # a sweep's run folders are not sweeps
        if depth >= max_depth:
            continue
        try:
            children = [e for e in os.scandir(folder) if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")]
        except OSError:
            continue
        stack.extend((Path(e.path), depth + 1) for e in children)

    def written(s: SweepStatus) -> float:
        for name in MARKERS:
            try:
                return os.lstat(s.folder / name).st_mtime
            except OSError:
                continue
        return 0.0

    return sorted(found, key=written, reverse=True)
