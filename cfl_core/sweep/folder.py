"""The sweep folder, written by the driver alone.

    NAME/sweep.json        the spec, the command, and every point's key, folder and swept values
    NAME/<run folder>/     one per point, today's run-folder format (config, partition, meta,
                           rounds.jsonl, summary) plus sweep_point.json (key, status, error, who ran it)
    NAME/results.csv       a row per run (tables.py)
    NAME/summary.md        mean ± std over seeds per cell (tables.py)
    NAME/progress.json     done / running / failed / pending, rewritten as the sweep goes
    NAME/events.jsonl      one line per start, end and run (appended, never rewritten)

A run folder appears whole or not at all: it is written into `.tmp/` and renamed into place,
so a sweep killed at any moment leaves every finished run complete and no half-written one.
A point is finished when its folder's sweep_point.json has its key and status finished.
`.lock` is held (flock) while a driver writes the folder: a second driver is refused.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..jsonio import read_json, write_json_atomic
from ..records import FINISHED, RunWriter

SWEEP_FILE = "sweep.json"
POINT_FILE = "sweep_point.json"
PROGRESS_FILE = "progress.json"
EVENTS_FILE = "events.jsonl"
RESULTS_FILE = "results.csv"
SUMMARY_FILE = "summary.md"
LOCK_FILE = ".lock"
TMP_DIR = ".tmp"
TRASH_DIR = ".trash"

# states of a point's folder
DONE, FAILED_BEFORE, MISSING, OTHER = "finished", "failed", "missing", "other"


class SweepFolder:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._lock_fd: int | None = None

    # -- one writer ---------------------------------------------------------------------------------
    def lock(self) -> None:
        import fcntl

        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            holder = read_json(self.root / PROGRESS_FILE) or {}
            raise ConfigError("out", str(self.root), f"a sweep folder no other sweep is writing (pid "
                                                     f"{holder.get('pid', '?')} on {holder.get('host', '?')} "
                                                     f"holds it)") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def clean(self) -> None:
        """Drop what a killed driver left half-done (never a finished run: those were renamed into place)."""
        for name in (TMP_DIR, TRASH_DIR):
            shutil.rmtree(self.root / name, ignore_errors=True)

    # -- reading ------------------------------------------------------------------------------------
    def state(self, point) -> str:
        folder = self.root / point.folder
        marker = read_json(folder / POINT_FILE)
        if marker is None:
            return OTHER if folder.exists() else MISSING
        if marker.get("key") != point.key:
            return OTHER
        return DONE if marker.get("status") == FINISHED else FAILED_BEFORE

    def marker(self, point) -> dict | None:
        return read_json(self.root / point.folder / POINT_FILE)

    def summary(self, point) -> dict | None:
        return read_json(self.root / point.folder / "summary.json")

    # -- writing ------------------------------------------------------------------------------------
    def write_sweep(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.root / SWEEP_FILE, data, default=str)

    def write_progress(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.root / PROGRESS_FILE, {**data, "pid": os.getpid(), "host": socket.gethostname(),
                                                      "updated_at": time.time()})

    def event(self, kind: str, **fields) -> None:
        line = json.dumps({"event": kind, "time": round(time.time(), 3), **fields}, default=str) + "\n"
        fd = os.open(self.root / EVENTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)

    def write_run(self, point, result: dict, extra: dict[str, Any]) -> dict:
        """Write the run's folder atomically (replacing a failed or stale one); returns its sweep_point.json."""
        run_id = uuid.uuid4().hex[:12]
        tmp = self.root / TMP_DIR / f"{point.key}-{run_id}"
        tmp.mkdir(parents=True)
        writer = RunWriter(tmp)
        writer.write_json("config.json", result["config"])
        if result.get("partition") is not None:
            writer.write_json("partition.json", result["partition"])
        if result.get("meta") is not None:
            writer.write_json("meta.json", result["meta"])
        if result.get("records"):
            (tmp / "rounds.jsonl").write_text("".join(line + "\n" for line in result["records"]), encoding="utf-8")
        writer.write_json("summary.json", result["summary"])
        marker = {"key": point.key, "index": point.index, "values": point.values, "status": result["status"],
                  "error": result.get("error"), "traceback": result.get("traceback"), "run_id": run_id,
                  "threads": result.get("threads"), "host": result.get("host"), "pid": result.get("pid"),
                  "wall_seconds": result.get("wall_seconds"), "finished_at": time.time(), **extra}
        write_json_atomic(tmp / POINT_FILE, marker, default=str)
        final = self.root / point.folder
        final.parent.mkdir(parents=True, exist_ok=True)
        old = None
        if final.exists():
            old = self.root / TRASH_DIR / f"{point.key}-{run_id}"
            old.parent.mkdir(parents=True, exist_ok=True)
            os.rename(final, old)
        os.rename(tmp, final)  # the one step that makes the run finished on disk
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return marker
