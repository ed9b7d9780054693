"""One writing process per run folder: an exclusive flock on the folder itself, held while a run writes it.

Two `run` commands started together into one new --out, a `run --resume` of a run the dashboard
is still training, or a dashboard Resume of a run a terminal is writing: the second process is
refused with one line naming the folder and the process that holds it (its heartbeat), instead
of interleaving rounds and configs. The kernel releases the lock when the writer closes it or
its process ends, however it ends (SIGKILL, out of memory), so a crashed run never stays locked.

The lock is taken on the directory (no lock file: nothing is added to the run folder). It keeps
other processes out; within one process a new writer takes over the lock of an earlier one the
process dropped without closing (what a process writes is its own to order, and an object left
for the garbage collector must not lock its own process out). Where the file system cannot lock
(some network file systems), writing goes on unlocked, as before.
"""
from __future__ import annotations

import errno
import os
import threading
from pathlib import Path


class FolderBusy(OSError):
    """Another process is writing this run folder: the message names it and who holds it."""


_HELD: dict[tuple[int, int], "FolderLock"] = {}  # (device, inode) of a folder -> this process's lock on it
_HELD_LOCK = threading.Lock()


HEARTBEAT_FILE = "heartbeat.json"  # the writer's process identity (cfl_core.records.HEARTBEAT_FILE)


def _holder(folder: Path) -> str:
    from .jsonio import read_json

    beat = read_json(folder / HEARTBEAT_FILE)
    if not isinstance(beat, dict) or not isinstance(beat.get("pid"), int):
        return "another process"
    return f"process {beat['pid']} on {str(beat.get('host', '?'))[:80]}"


class FolderLock:
    """The exclusive lock on a run folder, until release() (idempotent) or this process ends."""

    def __init__(self, folder: str | os.PathLike):
        import fcntl

        self.folder = Path(folder)
        fd = os.open(self.folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        st = os.fstat(fd)
        self._key = (st.st_dev, st.st_ino)
        self._fd: int | None = None
        with _HELD_LOCK:
            earlier = _HELD.get(self._key)
            if earlier is not None and earlier._fd is not None:
                os.close(fd)
                self._fd, earlier._fd = earlier._fd, None  # this process holds it already: the new writer's now
                _HELD[self._key] = self
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise FolderBusy(f"the run folder {self.folder} is being written by {_holder(self.folder)}: "
                                     "wait for that run to end (or stop it) first") from None
                # no locks on this file system: write unlocked, as before
            self._fd = fd
            _HELD[self._key] = self

    def release(self) -> None:
        with _HELD_LOCK:
            if self._fd is not None:
                os.close(self._fd)  # closing the descriptor releases the flock
                self._fd = None
                if _HELD.get(self._key) is self:
                    del _HELD[self._key]

    @property
    def held(self) -> bool:
        return self._fd is not None
