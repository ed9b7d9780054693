"""Start the dashboard (as `python -m cfl_ui.serve`) with a sampler of its threads: where each thread is, every 5 ms.

    CFL_SAMPLER_OUT=samples.json python benchmarks/server_sampler.py [streamlit flags]

On exit (SIGTERM) it writes the wall time of every script run (full page runs
and fragment reruns apart: median, p90, max, total) and, per thread kind (the event loop, page scripts, job
threads, ...), how many samples were taken and the 25 most frequent innermost
frames of this project or the libraries it calls (file:line function), plus the
share of samples in which the innermost frame was in our own code. A sampler
needs the interpreter lock to look, so a thread that holds it for long stretches
(a training thread between torch calls, a page building a figure) delays the
samples of the others: the sample counts per thread show that too.
"""
from __future__ import annotations

import atexit
import collections
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

_counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
_samples: collections.Counter = collections.Counter()
_cpu: collections.Counter = collections.Counter()  # CPU seconds per thread kind (from /proc)
_stop = threading.Event()
_HZ = os.sysconf("SC_CLK_TCK")


def _thread_ticks(native: int) -> int | None:
    try:
        with open(f"/proc/self/task/{native}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def _kind(name: str) -> str:
    return re.sub(r"[-_]?\d+$|\b[0-9a-f]{8}\b", "", name) or name


def _frame_text(frame) -> str:
    code = frame.f_code
    path = code.co_filename
    short = path.split("site-packages/")[-1] if "site-packages/" in path else os.path.relpath(path, REPO)
    return f"{short}:{frame.f_lineno} {code.co_name}"


def _sample() -> None:
    me = threading.get_ident()
    last: dict[int, int] = {}
    while not _stop.is_set():
        threads = {t.ident: t for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            thread = threads.get(ident)
            kind = _kind(thread.name if thread else "?")
            native = getattr(thread, "native_id", None)
            ticks = _thread_ticks(native) if native else None
            if ticks is not None:
                ran = ticks - last.get(native, ticks)
                last[native] = ticks
                _cpu[kind] += ran / _HZ
                if ran <= 0:
                    continue  # not on a CPU since the last look: its frame says where it waits, not works
            _samples[kind] += 1
            # the innermost frame that is not threading/queue plumbing
            f = frame
            while f is not None and ("threading.py" in f.f_code.co_filename or "queue.py" in f.f_code.co_filename):
                f = f.f_back
            _counts[kind][_frame_text(f or frame)] += 1
        time.sleep(0.005)


def _write() -> None:
    _stop.set()
    out = os.environ.get("CFL_SAMPLER_OUT")
    if not out:
        return
    data = {kind: {"cpu_seconds": round(_cpu[kind], 2), "samples_on_cpu": _samples[kind],
                   "top": _counts[kind].most_common(25)} for kind in set(_samples) | set(_cpu)}
    data["script_runs_s"] = {kind: _run_summary(v) for kind, v in _runs.items()}
    Path(out).write_text(json.dumps(data, indent=1))


# wall seconds of each script run, full page runs and fragment reruns apart (what a session waits for on the server)
_runs: dict[str, list[float]] = collections.defaultdict(list)


def _time_script_runs() -> None:
    from streamlit.runtime.scriptrunner import script_runner

    original = script_runner.ScriptRunner._run_script

    def timed(self, rerun_data):
        started = time.perf_counter()
        try:
            return original(self, rerun_data)
        finally:
            kind = "fragment" if getattr(rerun_data, "fragment_id_queue", None) else "page"
            _runs[kind].append(time.perf_counter() - started)

    script_runner.ScriptRunner._run_script = timed


def _run_summary(values: list[float]) -> dict:
    values = sorted(values)
    if not values:
        return {"n": 0}
    return {"n": len(values), "median": round(values[len(values) // 2], 3),
            "p90": round(values[int(0.9 * (len(values) - 1))], 3), "max": round(values[-1], 3),
            "total": round(sum(values), 1)}


def main() -> int:
    _time_script_runs()
    threading.Thread(target=_sample, name="sampler", daemon=True).start()
    atexit.register(_write)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    from cfl_ui.serve import main as serve

    return serve(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
