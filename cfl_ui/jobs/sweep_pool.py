"""Where the server's sweeps run: the executor CFL_SWEEP_EXECUTOR / CFL_RAY_ADDRESS names, and the local pool of
worker processes one server process keeps warm between sweeps.

    name, address = executor_choice()        # ConfigError naming the variable when one is wrong
    pool = kept_pool()                       # one per server process (its workers end with it)
    pool.warm()                              # the workers load torch and the engine while a form is filled in
    executor = pool.take(job)                # the warm pool for this sweep, None while another sweep has it
    pool.give_back(job)

A warm pool's workers have loaded torch and the engine already, so a sweep starts at once; it serves one sweep at
a time (a second sweep running together gets a pool of its own). `FewerSlots` keeps fewer of its runs in flight
when the memory budget allows fewer than its workers. Plain Python (no Streamlit).
"""
from __future__ import annotations

import os
import threading
import time

from cfl_core.sweep.executors import Executor, LocalExecutor, cpu_count, executor_from_environment


def executor_choice() -> tuple[str, str | None]:
    """(executor, Ray address) for the server's sweeps; ConfigError naming the variable when one is wrong."""
    return executor_from_environment()


def executor_text(name: str, address: str | None) -> str:
    if name == "ray":
        return f"Ray at {address}" if address else "a local Ray instance"
    if name == "serial":
        return "this server's process, one run at a time"
    return f"a pool of {cpu_count()} worker processes on this machine"


def warm_up_enabled() -> bool:
    return os.environ.get("CFL_UI_WARMUP", "1") != "0"  # cfl_ui.form.session.WARMUP_ENV (tests set it to 0)


class FewerSlots(Executor):
    """An executor (the kept pool) with at most `slots` of its runs in flight: what the memory budget allows."""

    def __init__(self, inner: Executor, slots: int):
        self.inner = inner
        self.name = inner.name
        self.threads = getattr(inner, "threads", 1)
        self.slots = max(1, min(int(slots), inner.slots))

    def describe(self):
        return {**self.inner.describe(), "slots": self.slots}

    def submit(self, task):
        return self.inner.submit(task)

    def wait(self, handles, timeout):
        return self.inner.wait(handles, timeout)

    def cancel(self):
        self.inner.cancel()

    def close(self):
        pass  # the kept pool outlives the sweep


class KeptPool:
    """The server's local pool (cores x 1 thread), started once, lent to one sweep at a time."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pool: LocalExecutor | None = None
        self._user = None
        self.start_seconds: float | None = None  # measured: wall time of the pool's last start
        self.worker_start_cpu: float | None = None  # measured: CPU seconds one worker took to start
        self._warming = False
        self.warm_began: float | None = None  # time.monotonic() when the workers were last started

    def warmed_for(self) -> float:
        """Seconds the workers have been starting (0 when they are not starting)."""
        return time.monotonic() - self.warm_began if self.warming() and self.warm_began is not None else 0.0

    def warm_now(self) -> bool:
        """The pool's workers are started and answered."""
        return self._pool is not None and self.start_seconds is not None and self._pool._pool is not None

    def warming(self) -> bool:
        """The pool's workers are starting now (warm was called, they have not all answered yet)."""
        return self._warming and self._pool is not None and self._pool._pool is not None

    def warm(self) -> None:
        """Start the pool's workers in the background (they load torch and the engine), unless started."""
        from .cpu_sampler import start as start_sampling

        start_sampling()  # the estimate reads what the other processes use (started with the pool: page open)
        with self._lock:
            if self._pool is not None:
                return
            self._pool = pool = LocalExecutor(cpu_count(), 1)
        started = time.perf_counter()
        self.warm_began = time.monotonic()
        self._warming = True
        futures = pool.warm()

        def measured(_):
            if all(f.done() for f in futures):
                self._warming = False
                self.start_seconds = time.perf_counter() - started
                try:
                    self.worker_start_cpu = max(f.result()["cpu_seconds"] for f in futures)
                except Exception:
                    return

        for f in futures:
            f.add_done_callback(measured)

    def take(self, user) -> LocalExecutor | None:
        """The pool for `user`'s sweep (started when it is not), or None while another sweep has it."""
        with self._lock:
            if self._user is not None and self._user is not user:
                return None
            if self._pool is None:
                self._pool = LocalExecutor(cpu_count(), 1)
            self._user = user
            return self._pool

    def give_back(self, user) -> None:
        with self._lock:
            if self._user is user:
                self._user = None

    def shutdown(self) -> None:
        """End the pool's workers, after the sweep using it has stopped (its finished runs written back)."""
        user = self._user
        if user is not None:
            user.stop()
            user.join(5)
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.cancel()


_POOL: KeptPool | None = None
_POOL_LOCK = threading.Lock()


def kept_pool() -> KeptPool:
    """The process-wide kept pool (made on first use; its workers end with the process)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            import atexit

            _POOL = KeptPool()
            atexit.register(_POOL.shutdown)
        return _POOL
