"""How busy the machine's other processes keep its cores: sampled once a second from /proc, kept a minute.

The sweep estimate needs what its workers will compete with while they run. A short probe (a thread kept busy
0.2 s) and the 1-minute load average both misjudge it: the probe runs while the page itself is being drawn (the
server and the browser busy for that moment only), and the load average lags a minute, counts this sweep's own
workers and, on this shared machine, tasks that are not competing for these cores at all (it read 4 while the
cores were idle). At load 2 on a quiet machine they put two workers at 1.1 cores where the runs got 1.7
(benchmarks/IFCA_PAGE.md, 2026-12-05). What the other processes actually used, second by second, is in
/proc/stat less this process and its descendants (the sweep's own workers, the server's threads); a process
using a core half of the time counts as half a competitor.

Tried and dropped: the kernel's count of running tasks (`procs_running`) once a second read 0 to 3 on the same
quiet machine (a browser's several processes drawing at once) and put a 60-run sweep 34% short or 57% long.
What the others use while this process's own workers run is less than what they would take alone (two busy
loops used 0.8-1.3 cores beside a sweep: estimates 22-51% short), so the seconds in which this process and its
children used less than OWN_QUIET cores are the ones averaged, where there are enough of them.
"""
from __future__ import annotations

import os
import statistics
import threading
import time
from collections import deque

INTERVAL_S = 1.0
KEPT = 60  # seconds of history
OWN_QUIET = 0.5  # cores: below this, this process's own work hardly holds the others back
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

_samples: deque = deque(maxlen=KEPT)  # (time.monotonic(), cores the others used in the second before, own cores)
_lock = threading.Lock()
_thread: threading.Thread | None = None


def _machine_busy() -> int | None:
    """Busy ticks of all cores since boot (user, nice, system, irq, softirq, steal), or None without /proc."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return user + nice + system + irq + softirq + steal


def _own_ticks() -> int:
    """CPU ticks used by this process and its descendants that are alive (the sweep's workers)."""
    me = os.getpid()
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    try:
        names = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return 0
    for name in names:
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue  # the process ended meanwhile
        rest = text[text.rfind(")") + 2:].split()
        if len(rest) < 13:
            continue
        parent[int(name)] = int(rest[1])
        ticks[int(name)] = int(rest[11]) + int(rest[12])  # utime + stime
    total = 0
    for pid, used in ticks.items():
        p, depth = pid, 0
        while p not in (0, 1) and depth < 64:
            if p == me:
                total += used
                break
            p, depth = parent.get(p, 0), depth + 1
    return total


def _run() -> None:
    before = (time.monotonic(), _machine_busy(), _own_ticks())
    while True:
        time.sleep(INTERVAL_S)
        now = (time.monotonic(), _machine_busy(), _own_ticks())
        if before[1] is not None and now[1] is not None:
            seconds = max(1e-3, now[0] - before[0])
            # a descendant that ended in the second takes its ticks with it: never below 0
            own = max(0, now[2] - before[2]) / _TICKS / seconds
            others = max(0.0, (now[1] - before[1]) / _TICKS / seconds - own)
            with _lock:
                _samples.append((now[0], others, own))
        before = now


def start() -> None:
    """Start sampling in a daemon thread (once per process)."""
    global _thread
    with _lock:
        if _thread is not None or not os.path.exists("/proc/stat"):
            return
        _thread = threading.Thread(target=_run, name="cpu-sampler", daemon=True)
        _thread.start()


def others_busy(window_s: float = 30.0, least: int = 3) -> float | None:
    """The cores the other processes kept busy, on average over the seconds of the last `window_s` in which this
    process's own work was light (all of them when none was); None with fewer than `least` samples (just started,
    or no /proc)."""
    now = time.monotonic()
    with _lock:
        recent = [(v, own) for t, v, own in _samples if now - t <= window_s]
    if len(recent) < least:
        return None
    alone = [v for v, own in recent if own < OWN_QUIET]
    return float(statistics.fmean(alone or [v for v, _ in recent]))
