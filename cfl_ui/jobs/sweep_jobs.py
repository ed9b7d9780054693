"""Sweeps the server drives itself (the IFCA-initialisation page): one driver thread per sweep folder, the
executor from CFL_SWEEP_EXECUTOR / CFL_RAY_ADDRESS, and a local pool kept warm between sweeps.

    jobs = sweep_jobs()                       # one per server process
    job = jobs.start(spec, folder)            # cfl_core.sweep.run_sweep in a background thread
    job.progress, job.state, job.error        # what the page shows; job.stop() ends it (finished runs stay)

The driver is the core's `run_sweep`: it writes an ordinary sweep folder (the Sweeps page lists it, and the
same settings later resume it). The runs themselves go to the executor's worker processes (or Ray), so the
server's threads only wait for results and keep answering every session. With the local executor the server
keeps one pool of worker processes (cores x 1 thread) alive between sweeps: its workers have loaded torch and
the engine already, so a second sweep starts at once. Plain Python (no Streamlit).
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from cfl_core.errors import ConfigError
from cfl_core.sweep.executors import LocalExecutor, cpu_count, executor_from_environment

from .jobs import readable

STOPPED_STATE, RUNNING_STATE, FINISHED_STATE, FAILED_STATE = "stopped", "running", "finished", "failed"


class _Stop(Exception):
    """Raised from the progress callback to end a sweep (the core cancels the runs in flight)."""


def executor_choice() -> tuple[str, str | None]:
    """(executor, Ray address) for the server's sweeps; ConfigError naming the variable when one is wrong."""
    return executor_from_environment()


def executor_text(name: str, address: str | None) -> str:
    if name == "ray":
        return f"Ray at {address}" if address else "a local Ray instance"
    if name == "serial":
        return "this server's process, one run at a time"
    return f"a pool of {cpu_count()} worker processes on this machine"


class SweepJob:
    """One sweep driven by this server: its thread, its progress (a dict, replaced whole) and how it ended."""

    def __init__(self, spec, folder: Path, executor, address: str | None, name: str, on_end=None):
        self.spec, self.folder, self.address, self.executor_name = spec, Path(folder), address, name
        self._executor = executor  # a name, or the kept pool
        self._on_end = on_end
        self.progress: dict | None = None
        self.state = RUNNING_STATE
        self.error: str | None = None
        self.started = time.time()
        self.ended: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name=f"cfl-sweep-{self.folder.name}", daemon=True)

    def start(self) -> "SweepJob":
        self._thread.start()
        return self

    @property
    def active(self) -> bool:
        return self.ended is None

    def stop(self) -> None:
        """End the sweep about half a second from now; its finished runs stay (Run again resumes it)."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _progress(self, progress) -> None:
        self.progress = {**progress.as_dict(), "slots": progress.slots}
        if self._stop.is_set():
            raise _Stop()

    def _work(self) -> None:
        from cfl_core.sweep import run_sweep

        command = f"python -m cfl_core sweep {self.folder / 'spec.json'} --out {self.folder}"
        try:
            run_sweep(self.spec, self.folder, executor=self._executor, address=self.address, command=command,
                      on_progress=self._progress)
            self.state = FINISHED_STATE
        except _Stop:
            self.state = STOPPED_STATE
        except ConfigError as exc:
            self.state, self.error = FAILED_STATE, str(exc)
        except Exception as exc:  # the executor could not start (a Ray address that does not answer, ...)
            self.state, self.error = FAILED_STATE, readable(exc)
        finally:
            self.ended = time.time()
            if self._on_end is not None:
                self._on_end(self)


class SweepJobs:
    """The sweeps this server process drives, by folder, and the local pool it keeps for them."""

    def __init__(self):
        import sys

        from .manager import SWITCH_INTERVAL

        if sys.getswitchinterval() > SWITCH_INTERVAL:
            sys.setswitchinterval(SWITCH_INTERVAL)  # the server's threads hand the GIL on promptly (see manager)
        self._lock = threading.Lock()
        self._jobs: dict[str, SweepJob] = {}
        self._pool: LocalExecutor | None = None
        self._pool_user: SweepJob | None = None
        self.pool_start_seconds: float | None = None  # measured: wall time of the kept pool's last start
        self.worker_start_cpu: float | None = None  # measured: CPU seconds one worker took to start
        self._warming = False  # warm_pool's workers are starting

    def jobs(self) -> list[SweepJob]:
        with self._lock:
            return list(self._jobs.values())

    def get(self, folder: Path) -> SweepJob | None:
        with self._lock:
            return self._jobs.get(str(Path(folder)))

    def pool_warm(self) -> bool:
        return self._pool is not None and self.pool_start_seconds is not None and self._pool._pool is not None

    def pool_warming(self) -> bool:
        """The kept pool's workers are starting now (warm_pool was called, they have not all answered yet)."""
        return self._warming and self._pool is not None and self._pool._pool is not None

    def warm_pool(self) -> None:
        """Start the kept pool's workers in the background (they load torch and the engine), unless started."""
        with self._lock:
            if self._pool is not None:
                return
            self._pool = LocalExecutor(cpu_count(), 1)
            pool = self._pool
        started = time.perf_counter()
        self._warming = True
        futures = pool.warm()

        def measured(_):
            if all(f.done() for f in futures):
                self._warming = False
                self.pool_start_seconds = time.perf_counter() - started
                try:
                    cpus = [f.result()["cpu_seconds"] for f in futures]
                except Exception:
                    return
                self.worker_start_cpu = max(cpus)

        for f in futures:
            f.add_done_callback(measured)

    def start(self, spec, folder: Path, *, persist_spec: dict | None = None) -> SweepJob:
        """Drive `spec` into `folder` in a background thread (the folder's running job when there is one)."""
        name, address = executor_choice()
        key = str(Path(folder))
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and job.active:
                return job
            executor = name
            if name == "local" and self._pool_user is None:  # the kept pool serves one sweep at a time
                if self._pool is None:
                    self._pool = LocalExecutor(cpu_count(), 1)
                executor = self._pool
            job = SweepJob(spec, folder, executor, address, name, on_end=self._ended)
            if executor is self._pool:
                self._pool_user = job
            self._jobs[key] = job
        if persist_spec is not None:
            import json

            Path(folder).mkdir(parents=True, exist_ok=True)
            (Path(folder) / "spec.json").write_text(json.dumps(persist_spec, indent=1), encoding="utf-8")
        return job.start()

    def _ended(self, job: SweepJob) -> None:
        with self._lock:
            if self._pool_user is job:
                self._pool_user = None

    def shutdown(self) -> None:
        for job in list(self._jobs.values()):
            job.stop()
        for job in list(self._jobs.values()):
            job.join(5)
        if self._pool is not None:
            self._pool.cancel()
            self._pool = None


_JOBS: SweepJobs | None = None
_JOBS_LOCK = threading.Lock()


def sweep_jobs() -> SweepJobs:
    """The process-wide sweep driver (created on first use; its pool ends with the process)."""
    global _JOBS
    with _JOBS_LOCK:
        if _JOBS is None:
            import atexit

            _JOBS = SweepJobs()
            atexit.register(_JOBS.shutdown)
        return _JOBS


def warm_up_enabled() -> bool:
    return os.environ.get("CFL_UI_WARMUP", "1") != "0"  # cfl_ui.form.session.WARMUP_ENV (tests set it to 0)
