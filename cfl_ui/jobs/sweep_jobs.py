"""One sweep the server drives: it waits its turn in the job manager's queue, then the core's `run_sweep` runs it in
a background thread on the executor CFL_SWEEP_EXECUTOR / CFL_RAY_ADDRESS names (the kept local pool by default).

    job = service.start(...)                  # cfl_ui.jobs.sweep_service makes them
    job.state, job.position, job.progress     # queued (its place in line) / running / finished / stopped / failed
    job.stop()                                # ends it about half a second from now; its finished runs stay

The driver writes an ordinary sweep folder (the Sweeps page lists it, and the same spec later resumes it). The runs
themselves go to the executor's worker processes (or Ray), so the server's threads only wait for results and keep
answering every session. While it runs the sweep holds one of the manager's places and the memory of its runs in
flight (`memory_bytes`), as a run does. Plain Python (no Streamlit).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from cfl_core.errors import ConfigError

from .sweep_pool import FewerSlots, kept_pool
from .worker import readable

QUEUED_STATE, STOPPED_STATE, RUNNING_STATE, FINISHED_STATE, FAILED_STATE = (
    "queued", "stopped", "running", "finished", "failed")


class _Stop(Exception):
    """Raised from the progress callback to end a sweep (the core cancels the runs in flight)."""


class SweepJob:
    """One sweep driven by this server: its owner, its place in the queue, its progress and how it ended."""

    def __init__(self, scheduler, spec, folder: Path, rel: str, *, owner: str, kind: str, title: str,
                 executor: str, address: str | None, slots: int, memory_bytes: int, points: int,
                 max_points: int | None, on_end=None):
        self.scheduler = scheduler
        self.spec, self.folder, self.rel = spec, Path(folder), rel
        self.owner, self.kind, self.title = owner, kind, title
        self.executor_name, self.address = executor, address
        self.slots = max(1, int(slots))  # runs in flight at most: the memory budget's share of the executor
        self.memory_bytes = int(memory_bytes)  # what the scheduler counts against the memory limit
        self.points, self.max_points = points, max_points
        self._on_end = on_end
        self.progress: dict | None = None
        self.state = QUEUED_STATE
        self.error: str | None = None
        self.created = time.time()
        self.started: float | None = None
        self.ended: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name=f"cfl-sweep-{self.folder.name}", daemon=True)

    def start(self) -> "SweepJob":
        self._thread.start()
        return self

    @property
    def active(self) -> bool:
        return self.ended is None

    @property
    def position(self) -> int | None:
        """Its place in the job queue while it waits (1 = next), else None."""
        return self.scheduler.position(self) if self.state == QUEUED_STATE else None

    @property
    def waiting(self) -> str | None:
        """Why it waits although a place is free (the memory numbers), else None."""
        return self.scheduler.waiting_for_memory(self) if self.state == QUEUED_STATE else None

    def stop(self) -> None:
        """End the sweep (a queued one at once, a running one about half a second from now); its finished runs
        stay, and Resume runs the rest."""
        self._stop.set()
        self.scheduler.wake()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _progress(self, progress) -> None:
        self.progress = {**progress.as_dict(), "slots": progress.slots}
        if self._stop.is_set():
            raise _Stop()

    def _executor(self):
        """(the executor for run_sweep, workers): the kept pool when it is free (fewer slots when the memory budget
        says so), else one made for this sweep with `slots` workers."""
        if self.executor_name == "local":
            pool = kept_pool().take(self)
            if pool is not None:
                return (pool if self.slots >= pool.slots else FewerSlots(pool, self.slots)), None
            return "local", self.slots
        if self.executor_name == "ray" and self.address:
            return "ray", None  # the cluster's CPUs decide
        return self.executor_name, (self.slots if self.executor_name == "ray" else None)

    def _work(self) -> None:
        from cfl_core.sweep import run_sweep

        holding = False
        try:
            if not self.scheduler.acquire(self, abort=self._stop.is_set):
                self.state = STOPPED_STATE  # stopped while it waited: nothing ran
                return
            holding = True
            if self._stop.is_set():
                self.state = STOPPED_STATE
                return
            self.state, self.started = RUNNING_STATE, time.time()
            executor, workers = self._executor()
            command = f"python -m cfl_core sweep {self.folder / 'spec.json'} --out {self.folder}"
            run_sweep(self.spec, self.folder, executor=executor, workers=workers, address=self.address,
                      command=command, on_progress=self._progress, max_points=self.max_points)
            self.state = FINISHED_STATE
        except _Stop:
            self.state = STOPPED_STATE
        except ConfigError as exc:
            self.state, self.error = FAILED_STATE, str(exc)
        except Exception as exc:  # the executor could not start (a Ray address that does not answer, ...)
            self.state, self.error = FAILED_STATE, readable(exc)
        finally:
            kept_pool().give_back(self)
            if holding:
                self.scheduler.done(self)
            self.ended = time.time()
            if self._on_end is not None:
                self._on_end(self)
