"""Executors: who runs a sweep's points. Each takes plain task dicts and gives back plain result dicts.

- `serial`: one after another in this process (debugging, the benchmark's baseline).
- `local` (the default): a pool of worker processes on this machine (spawned, so no state is
  inherited); `workers` x `threads` CPUs in use.
- `ray`: one Ray task per run. Without an address it starts a local Ray instance with
  `workers x threads` CPUs; with `auto` or `ray://host:port` it joins an existing cluster and ships
  this package to it (`runtime_env` py_modules). Results come back to the driver as objects, so no
  shared file system is needed. Ray does the scheduling: there is no scheduler here.

The driver keeps at most `slots` runs in flight and asks `wait` for the ones that ended; a run
that raised inside the executor itself (a worker process that died, a lost Ray node) comes back as
a failed result with the executor's error, like a run that failed on its own.
"""
from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .task import init_worker, run_point, warm_worker

EXECUTORS = ("local", "ray", "serial")
EXECUTOR_ENV, ADDRESS_ENV = "CFL_SWEEP_EXECUTOR", "CFL_RAY_ADDRESS"  # for a server that starts sweeps itself


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def executor_failure(task: dict, exc: BaseException) -> dict:
    from ..records import FAILED, summarize

    return {"key": task["key"], "status": FAILED, "error": f"executor: {type(exc).__name__}: {exc}",
            "traceback": "".join(traceback.format_exception(exc, limit=20)), "config": task["config"],
            "partition": None, "meta": None, "records": [], "threads": task.get("threads"),
            "summary": summarize(task["config"].get("algorithm", "?"), [], FAILED)}


class Executor:
    name = "base"
    slots = 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name, "slots": self.slots}

    def submit(self, task: dict):  # -> a handle
        raise NotImplementedError

    def wait(self, handles: list, timeout: float) -> list[tuple[Any, dict]]:  # -> [(handle, result)]
        raise NotImplementedError

    def close(self) -> None:
        pass

    def cancel(self) -> None:
        self.close()


class SerialExecutor(Executor):
    name = "serial"

    def __init__(self, threads: int = 1):
        import torch

        self.threads = threads
        self._before = torch.get_num_threads()
        self._queue: dict[int, dict] = {}
        self._next = 0

    def submit(self, task):
        self._next += 1
        self._queue[self._next] = task
        return self._next

    def wait(self, handles, timeout):
        handle = handles[0]
        return [(handle, run_point(self._queue.pop(handle)))]

    def close(self):
        import torch

        torch.set_num_threads(self._before)


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, workers: int, threads: int = 1):
        self.workers, self.threads = workers, threads
        self.slots = workers
        self._pool = None
        self._start()

    def _start(self):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=init_worker, initargs=(self.threads,))

    def describe(self):
        return {"executor": self.name, "slots": self.slots, "workers": self.workers, "threads": self.threads}

    def warm(self) -> list:
        """Start every worker and load the simulation libraries in it (futures of their pids): a pool kept by a
        server then starts its first sweep's runs without the workers' start-up."""
        if self._pool is None:
            self._start()
        return [self._pool.submit(warm_worker) for _ in range(self.workers)]

    def submit(self, task):
        from concurrent.futures.process import BrokenProcessPool

        if self._pool is None:  # cancelled or closed before: a kept executor starts a fresh pool
            self._start()
        try:
            future = self._pool.submit(run_point, task)
        except BrokenProcessPool:  # a worker died earlier: a fresh pool for the rest
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._start()
            future = self._pool.submit(run_point, task)
        future.task = task
        return future

    def wait(self, handles, timeout):
        from concurrent.futures import FIRST_COMPLETED
        from concurrent.futures import wait as wait_futures

        done, _ = wait_futures(handles, timeout=timeout, return_when=FIRST_COMPLETED)
        out = []
        for future in done:
            try:
                out.append((future, future.result()))
            except BaseException as exc:  # the worker process died, or the result could not travel
                out.append((future, executor_failure(future.task, exc)))
        return out

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def cancel(self):
        """Stop now: queued runs are dropped and the workers are ended (their runs were not finished)."""
        if self._pool is not None:
            processes = list(getattr(self._pool, "_processes", {}).values())
            self._pool.shutdown(wait=False, cancel_futures=True)
            for p in processes:
                if p.is_alive():
                    p.terminate()
            self._pool = None


def _ray_task(task: dict) -> dict:
    return run_point(task)


class RayExecutor(Executor):
    name = "ray"

    def __init__(self, threads: int = 1, address: str | None = None, cpus: int | None = None):
        try:
            import ray
        except ImportError:
            raise ConfigError("executor", "ray", "local or serial: Ray is not installed "
                                                 "(pip install 'cfl-lab[ray]', or -r requirements.txt)") from None
        self.ray = ray
        self.threads = threads
        self.address = address
        self._owner = False
        if not ray.is_initialized():
            package = str(Path(__file__).resolve().parents[1])
            common = dict(include_dashboard=False, logging_level="WARNING", log_to_driver=True)
            if address:
                # a cluster: this package travels with the job (torch and the rest must be installed there)
                ray.init(address=address, runtime_env={"py_modules": [package]}, **common)
            else:
                ray.init(num_cpus=cpus or cpu_count(), **common)
            self._owner = True
        total = ray.cluster_resources().get("CPU", 1)
        self.cluster_cpus = int(total)
        self.slots = max(1, int(total // threads))
        self._remote = ray.remote(_ray_task).options(num_cpus=threads)

    def describe(self):
        return {"executor": self.name, "slots": self.slots, "threads": self.threads,
                "address": self.address or "local", "cluster_cpus": self.cluster_cpus}

    def submit(self, task):
        ref = self._remote.remote(task)
        self._tasks = getattr(self, "_tasks", {})
        self._tasks[ref] = task
        return ref

    def wait(self, handles, timeout):
        ready, _ = self.ray.wait(handles, num_returns=1, timeout=timeout)
        out = []
        for ref in ready:
            task = self._tasks.pop(ref)
            try:
                out.append((ref, self.ray.get(ref)))
            except Exception as exc:  # a worker or node lost: Ray's retries ran out
                out.append((ref, executor_failure(task, exc)))
        return out

    def cancel(self):
        for ref in list(getattr(self, "_tasks", {})):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:
                pass
        self.close()

    def close(self):
        if self._owner and self.ray.is_initialized():
            self.ray.shutdown()
            self._owner = False


def executor_from_environment(default: str = "local") -> tuple[str, str | None]:
    """(executor, Ray address) from $CFL_SWEEP_EXECUTOR and $CFL_RAY_ADDRESS (a lab server sends its sweeps
    to a cluster with CFL_SWEEP_EXECUTOR=ray CFL_RAY_ADDRESS=ray://head:10001)."""
    name = os.environ.get(EXECUTOR_ENV) or default
    address = os.environ.get(ADDRESS_ENV) or None
    if name not in EXECUTORS:
        raise ConfigError(EXECUTOR_ENV, name, "one of " + ", ".join(EXECUTORS))
    if address and name != "ray":
        raise ConfigError(ADDRESS_ENV, address, f"only with {EXECUTOR_ENV}=ray")
    return name, address


def make_executor(name: str, *, workers: int | None = None, threads: int = 1, address: str | None = None,
                  points: int | None = None) -> Executor:
    """The executor `name` with `threads` torch threads per run; workers default to cores // threads."""
    if name not in EXECUTORS:
        raise ConfigError("executor", name, "one of " + ", ".join(EXECUTORS))
    if threads < 1:
        raise ConfigError("cpus_per_run", threads, "a whole number >= 1")
    if workers is not None and workers < 1:
        raise ConfigError("workers", workers, "a whole number >= 1")
    if address and name != "ray":
        raise ConfigError("address", address, "only with --executor ray")
    if name == "serial":
        return SerialExecutor(threads)
    if name == "ray":
        cpus = workers * threads if workers else None
        if address and workers:
            raise ConfigError("workers", workers, "not with --address: the cluster's CPUs decide how many run at once")
        return RayExecutor(threads, address, cpus)
    workers = workers or max(1, cpu_count() // threads)
    if points is not None:
        workers = max(1, min(workers, points))
    return LocalExecutor(workers, threads)
