"""Reading sweep folders back (for listings such as the dashboard's): progress, and whether a driver is at work.

`sweep_status(folder)` never writes and never waits. A sweep is `running` while a driver holds its
`.lock` (flock: released by the kernel when the driver exits or is killed), `interrupted` when its
last progress says it was running but no driver holds the lock, and `finished` otherwise.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..jsonio import read_json
from .folder import LOCK_FILE, POINT_FILE, PROGRESS_FILE, SWEEP_FILE

RUNNING, INTERRUPTED, FINISHED = "running", "interrupted", "finished"


def driver_active(folder: str | os.PathLike) -> bool:
    """True while a sweep driver holds the folder's lock."""
    import fcntl

    path = Path(folder) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


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

    @property
    def pending(self) -> int:
        return self.points - self.finished - self.failed - self.running


def sweep_status(folder: str | os.PathLike) -> SweepStatus | None:
    """The sweep in `folder` (None when it holds no sweep.json); counts read from the run folders."""
    folder = Path(folder)
    sweep = read_json(folder / SWEEP_FILE)
    if not isinstance(sweep, dict):
        return None
    finished = failed = 0
    for point in sweep.get("points", []):
        marker = read_json(folder / point["folder"] / POINT_FILE)
        if isinstance(marker, dict) and marker.get("key") == point["key"]:
            if marker.get("status") == "finished":
                finished += 1
            else:
                failed += 1
    progress = read_json(folder / PROGRESS_FILE) or {}
    active = driver_active(folder)
    if active:
        state = RUNNING
    elif progress.get("state") in ("running", "interrupted"):
        state = INTERRUPTED
    else:
        state = FINISHED
    running = int(progress.get("running") or 0) if active else 0
    return SweepStatus(folder, sweep.get("name", folder.name), sweep.get("command", ""), len(sweep.get("points", [])),
                       finished, failed, running, state, list(sweep.get("swept", [])),
                       progress.get("eta_seconds") if active else None)


def list_sweeps(root: str | os.PathLike, max_depth: int = 4) -> list[SweepStatus]:
    """Every sweep folder under root (at most max_depth levels down), newest first."""
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
        try:
            return (s.folder / SWEEP_FILE).stat().st_mtime
        except OSError:
            return 0.0

    return sorted(found, key=written, reverse=True)
