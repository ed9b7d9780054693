"""Which process writes a run, and whether it still lives: a run folder's heartbeat; and helpers that end
when the process they serve is gone (`exit_with`).

A writer records its process identity (host, pid and the process's start time,
so a pid reused by a later process is not mistaken for it). A reader on the
same host then knows at once whether a run without a summary is still being
written (its process lives) or was interrupted (it does not); on another host,
or where the start time cannot be read, it cannot tell (`None`), and callers
fall back to how recently the run's files changed.
"""
from __future__ import annotations

import os
import socket
import threading
import time


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (state first), None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: count fields after its end
    return text[text.rfind(")") + 2:].split()


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux /proc), None where it cannot be read."""
    fields = _stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def process_identity() -> dict:
    """This process: host, pid, start time, and the wall-clock time it was asked."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "pid_started": _start_time(pid), "time": time.time()}


def is_alive(identity) -> bool | None:
    """True/False when it can tell whether the process of `identity` still runs; None when it cannot."""
    if not isinstance(identity, dict):
        return None
    pid, started, host = identity.get("pid"), identity.get("pid_started"), identity.get("host")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or host != socket.gethostname():
        return None
    if pid == os.getpid():
        return None  # this very process: whether it still writes that run is for its caller to know
    if started is None:
        return None
    return _start_time(pid) == started  # None (no such process) or another start time: not that process


def exit_with(pid: int | None = None, poll_seconds: float = 0.5) -> None:
    """End this process soon after process `pid` (None: this process's parent) is gone.

    For helper processes that wait on a queue for work: when whoever feeds them is killed (SIGKILL, the
    out-of-memory killer) they never learn it and wait forever, each holding its libraries in memory; a
    sweep's pool workers and the dashboard's UMAP process did. A daemon thread polls the watched process's
    identity (pid and start time, a dead one's zombie counting as gone; without /proc, whether the pid
    exists) and ends this one with os._exit.
    """
    parent = os.getppid()
    watched = parent if pid is None else pid
    identity = {"host": socket.gethostname(), "pid": watched, "pid_started": _start_time(watched)}

    def gone() -> bool:
        if pid is None and os.getppid() != parent:
            return True
        fields = _stat_fields(watched)
        if fields is not None:  # dead but not yet reaped, or the pid reused by a later process
            return fields[0] in ("Z", "X") or is_alive(identity) is False
        try:
            os.kill(watched, 0)  # no /proc entry (gone), or no /proc at all: ask the kernel
        except ProcessLookupError:
            return True
        except OSError:
            return False  # it exists, only not ours to signal
        return False

    def watch() -> None:
        while not gone():
            time.sleep(poll_seconds)
        os._exit(1)  # nothing to flush: such a helper writes no files, and its answers had nobody to go to

    threading.Thread(target=watch, name="cfl-exit-with", daemon=True).start()
