"""The sweep folder, written by the driver alone.

    NAME/sweep.json        the spec, the command, and every point's key, folder and swept values
    NAME/<run folder>/     one per point, today's run-folder format (config, partition, meta,
                           rounds.jsonl, summary) plus sweep_point.json (key, status, error, who ran it)
    NAME/results.csv       a row per run (tables.py)
    NAME/summary.md        mean ± std over seeds per cell (tables.py)
    NAME/progress.json     done / running / failed / pending, rewritten as the sweep goes
    NAME/events.jsonl      one line per start, end and run (appended, never rewritten)

A run folder appears whole or not at all: it is written into `.cfl-sweep-tmp/` and renamed into place,
so a sweep killed at any moment leaves every finished run complete and no half-written one.
A point is finished when its folder's sweep_point.json has its key and status finished.
`.lock` is held (flock) while a driver writes the folder: a second driver is refused, so two
sweeps started together into one --out never mix (nor does a terminal take over a dashboard's).
A run in flight (local and serial executors: the workers share this machine's files) writes its rounds and a
checkpoint at most every PARTIAL_SAVE_EVERY_S seconds into `.cfl-sweep-partial/<point key>/`; a sweep stopped
part way resumes those runs from their checkpoints, with the records of a run that never stopped, and the
folder goes once the point's run folder is in place.
The driver deletes only what it made: entries of its own working folders whose names it gives
(`<point key>-<run id>`), never a `.tmp` or `.trash` of the user's.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import kind_of
from ..jsonio import read_json, write_json_atomic
from ..records import FINISHED, RunWriter

SWEEP_FILE = "sweep.json"
POINT_FILE = "sweep_point.json"
PROGRESS_FILE = "progress.json"
EVENTS_FILE = "events.jsonl"
RESULTS_FILE = "results.csv"
SUMMARY_FILE = "summary.md"
LOCK_FILE = ".lock"
TMP_DIR = ".cfl-sweep-tmp"  # a run folder being written, renamed into place when whole
TRASH_DIR = ".cfl-sweep-trash"  # a failed run's old folder on its way out
PARTIAL_DIR = ".cfl-sweep-partial"  # <point key>/: a run in flight, checkpointed (resumed by the next driver)
_KEY = re.compile(r"[0-9a-f]{16}")
_OWN_ENTRY = re.compile(r"[0-9a-f]{16}-[0-9a-f]{12}")  # <point key>-<run id>: the only names these folders get

# states of a point's folder
DONE, FAILED_BEFORE, MISSING, OTHER = "finished", "failed", "missing", "other"


class SweepFolder:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._lock_fd: int | None = None

    # -- one writer ---------------------------------------------------------------------------------
    def lock(self) -> None:
        """Hold the folder's `.lock` (ConfigError naming --out when another driver holds it, or when the lock
        is not a plain file: a link is never followed, a named pipe never opened)."""
        import fcntl

        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / LOCK_FILE
        flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as exc:
            raise ConfigError("out", str(self.root), f"a sweep folder whose {LOCK_FILE} is a plain file "
                                                     f"({exc.strerror})") from None
        kind = kind_of(os.fstat(fd).st_mode)
        if kind is not None:
            os.close(fd)
            raise ConfigError("out", str(self.root), f"a sweep folder whose {LOCK_FILE} is a plain file (it is {kind}: "
                                                     "remove it)")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            holder = read_json(self.root / PROGRESS_FILE)
            holder = holder if isinstance(holder, dict) else {}
            raise ConfigError("out", str(self.root), f"a sweep folder no other sweep is writing (pid "
                                                     f"{str(holder.get('pid', '?'))[:20]} on "
                                                     f"{str(holder.get('host', '?'))[:80]} holds it; wait for it to "
                                                     "end or stop it first)") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def clean(self) -> None:
        """Drop what a killed driver left half-done (never a finished run: those were renamed into place), and
        only what a driver made: entries named <point key>-<run id> in its own working folders."""
        for name in (TMP_DIR, TRASH_DIR):
            work = self.root / name
            try:
                if not stat.S_ISDIR(os.lstat(work).st_mode):
                    continue  # not ours (a file or a link of that name): left alone
                entries = list(os.scandir(work))
            except OSError:
                continue
            for entry in entries:
                if _OWN_ENTRY.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
            try:
                os.rmdir(work)  # only when empty: anything else in it stays
            except OSError:
                pass

    # -- runs in flight ------------------------------------------------------------------------------
    def partial_root(self) -> Path | None:
        """`.cfl-sweep-partial`, made if missing; None when something else holds that name (a link, a file: the
        runs then go without checkpoints, and nothing is written through it)."""
        root = self.root / PARTIAL_DIR
        try:
            os.mkdir(root)
        except FileExistsError:
            pass
        except OSError:
            return None
        try:
            return root if stat.S_ISDIR(os.lstat(root).st_mode) else None
        except OSError:
            return None

    def partial(self, point) -> Path | None:
        """Where the point's run checkpoints while in flight (None: nowhere safe to)."""
        root = self.partial_root()
        return root / point.key if root is not None and _KEY.fullmatch(point.key) else None

    def drop_partial(self, point) -> None:
        """Forget the point's checkpointed run (its run folder is in place); the folder goes when empty."""
        root = self.root / PARTIAL_DIR
        try:
            if not stat.S_ISDIR(os.lstat(root).st_mode):
                return
        except OSError:
            return
        entry = root / point.key
        if not (entry.is_dir() and not entry.is_symlink() and held_elsewhere(entry)):
            discard(entry)  # (one a cancelled worker still writes is left to it: the next sweep drops it)
        try:
            os.rmdir(root)
        except OSError:
            pass

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
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.root / EVENTS_FILE, flags, 0o644)
            kind_found = kind_of(os.fstat(fd).st_mode)
        except OSError as exc:  # a link (ELOOP), a pipe without a reader (ENXIO), ...
            kind_found, fd = f"not writable ({exc.strerror})", None
        if kind_found is not None:
            if fd is not None:
                os.close(fd)
            raise ConfigError("out", str(self.root), f"a sweep folder whose {EVENTS_FILE} is a plain file (it is "
                                                     f"{kind_found}: remove it)")
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
        writer.close()
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


def discard(path: Path) -> None:
    """Remove `path` itself: a directory with what is in it (links inside removed, never followed), or a link,
    file or pipe (only the entry: never what a link points to)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


def held_elsewhere(run_folder: Path) -> bool:
    """Another process holds the run folder's lock (a cancelled sweep's worker not ended yet, still writing)."""
    from ..folder_lock import FolderBusy, FolderLock

    try:
        FolderLock(run_folder).release()
    except FolderBusy:
        return True
    except OSError:
        return False
    return False
