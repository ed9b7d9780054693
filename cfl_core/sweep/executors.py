"""Executors: who runs a sweep's points. Each takes plain task dicts and gives back plain result dicts.

- `serial`: one after another in this process (debugging, the benchmark's baseline).
- `local` (the default): a pool of worker processes on this machine (spawned, so no state is
  inherited); `workers` x `threads` CPUs in use.
- `ray`: one Ray task per run. Without an address it starts a local Ray instance with
  `workers x threads` CPUs; with `auto` (the cluster this machine is a node of) or `HOST:PORT` (the
  head's GCS port, as `ray start --address` takes it) it joins an existing cluster, as Ray's docs
  recommend for a driver on a cluster node, and ships this package to it (`runtime_env` py_modules).
  A cluster with token authentication (Ray 2.52+; on by default for clusters from 2.61) is joined with
  the token Ray reads itself: RAY_AUTH_MODE=token and RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH (or
  ~/.ray/auth_token). `ray://` (Ray Client) is refused with the reason: it needs `ray[client]`,
  which is not installed. Results come back to the driver as objects, so no shared file system is
  needed; a task lost with its node is run again by Ray on another (max_retries). Ray does the
  scheduling: there is no scheduler here.

The driver keeps at most `slots` runs in flight and asks `wait` for the ones that ended; a run
that raised inside the executor itself (a worker process that died, a lost Ray node) comes back as
a failed result with the executor's error, like a run that failed on its own.
"""
from __future__ import annotations

import os
import re
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
    # the workers see the driver's files (this machine): a run in flight checkpoints into the sweep folder, so a
    # sweep stopped part way resumes its runs from their last checkpoint (runner.py, task.py)
    shares_files = False

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
    shares_files = True

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
    shares_files = True

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
                reachable(address)  # one line within seconds, where ray.init would retry for minutes
                # a cluster: this package travels with the job (torch and the rest must be installed there)
                try:
                    ray.init(address=address, runtime_env={"py_modules": [package]}, **common)
                except Exception as exc:  # a wrong or missing token, another Ray version, ...
                    raise ConfigError("address", address, "a Ray cluster this driver can join: " + join_failure(exc)) \
                        from None
            else:
                ray.init(num_cpus=cpus or cpu_count(), **common)
            self._owner = True
        total = ray.cluster_resources().get("CPU", 1)
        self.cluster_cpus = int(total)
        self.slots = max(1, int(total // threads))
        # a task lost with its node (killed, out of memory) is run again on another: its run is deterministic
        self._remote = ray.remote(_ray_task).options(num_cpus=threads, max_retries=RAY_RETRIES)

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


RAY_RETRIES = 3  # Ray's default for tasks, said here: a sweep relies on it when a node is lost
REACH_SECONDS = 3.0
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.\-]{0,252}))(?::([0-9]{1,5}))")
ADDRESS_FORMS = "auto (the cluster this machine is a node of) or HOST:PORT (the head's GCS port, e.g. 10.0.0.5:6379)"


def check_address(address: str | None, name: str = "address") -> str | None:
    """The Ray address as given (stripped), or ConfigError naming `name` with the forms allowed; None for none.
    Only its form is checked here (no network)."""
    if address is None:
        return None
    text = str(address).strip()
    if text == "auto":
        return text
    if "://" in text:
        scheme = text.split("://", 1)[0].lower()
        if scheme == "ray":
            raise ConfigError(name, address, ADDRESS_FORMS + ": ray:// is Ray Client, which needs ray[client] "
                                             "(not installed with CFL Lab); give the head's HOST:PORT instead")
        if scheme in ("http", "https"):
            raise ConfigError(name, address, ADDRESS_FORMS + ": an http:// address is the dashboard's, for "
                                             "`ray job submit` (see the README's Ray section)")
        raise ConfigError(name, address, ADDRESS_FORMS)
    match = _HOST_PORT.fullmatch(text)
    if match is None or not 1 <= int(match.group(2)) <= 65535:
        raise ConfigError(name, address, ADDRESS_FORMS)
    return text


def reachable(address: str) -> str:
    """The address to give ray.init, once something answers at it (ConfigError naming it, within REACH_SECONDS,
    when nothing does: ray.init itself retries for minutes). `auto` is found as Ray finds it (RAY_ADDRESS, or
    the cluster started on this machine)."""
    import socket

    target = address
    if address == "auto":
        from ray._private.services import get_ray_address_from_environment

        try:  # the address as Ray finds it for `auto` (before ray.init's own rewriting of a loopback one)
            target = get_ray_address_from_environment("auto", None)
        except Exception:  # noqa: BLE001 - any failure here is "no cluster found"
            target = None
        if not target or target == "auto":
            raise ConfigError("address", address, "a running Ray cluster on this machine (none was found: start "
                                                  "one with `ray start --head`, or give HOST:PORT)")
    host, _, port = target.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=REACH_SECONDS).close()
    except socket.gaierror:
        raise ConfigError("address", address, f"a reachable Ray cluster: there is no host {host!r}") from None
    except (socket.timeout, TimeoutError):
        raise ConfigError("address", address, f"a reachable Ray cluster: {target} did not answer within "
                                              f"{REACH_SECONDS:g} s") from None
    except OSError as exc:
        raise ConfigError("address", address, f"a reachable Ray cluster: {target} "
                                              f"({(exc.strerror or type(exc).__name__).lower()})") from None
    return target


def join_failure(exc: BaseException) -> str:
    """Why ray.init could not join, in one line, with what to do about a token."""
    text = " ".join(str(exc).split())[:200] or type(exc).__name__
    return (f"{type(exc).__name__}: {text} (a cluster with token authentication needs its token here: "
            "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN, or RAY_AUTH_TOKEN_PATH; see the README's Ray section)")


def executor_from_environment(default: str = "local") -> tuple[str, str | None]:
    """(executor, Ray address) from $CFL_SWEEP_EXECUTOR and $CFL_RAY_ADDRESS (a lab server sends its sweeps
    to a cluster with CFL_SWEEP_EXECUTOR=ray CFL_RAY_ADDRESS=auto, or the head's HOST:PORT)."""
    name = os.environ.get(EXECUTOR_ENV) or default
    address = os.environ.get(ADDRESS_ENV) or None
    if name not in EXECUTORS:
        raise ConfigError(EXECUTOR_ENV, name, "one of " + ", ".join(EXECUTORS))
    if address and name != "ray":
        raise ConfigError(ADDRESS_ENV, address, f"only with {EXECUTOR_ENV}=ray")
    return name, check_address(address, ADDRESS_ENV)


def check_executor(name: str, *, workers: int | None = None, threads: int = 1, address: str | None = None,
                   reach: bool = False) -> str | None:
    """ConfigError for an executor request that cannot work, before anything is written; the Ray address checked
    (and with `reach`, that something answers at it). Returns the address to use."""
    if name not in EXECUTORS:
        raise ConfigError("executor", name, "one of " + ", ".join(EXECUTORS))
    if threads < 1:
        raise ConfigError("cpus_per_run", threads, "a whole number >= 1")
    if workers is not None and workers < 1:
        raise ConfigError("workers", workers, "a whole number >= 1")
    if address is not None and name != "ray":
        raise ConfigError("address", address, "only with --executor ray")
    address = check_address(address)
    if address and workers:
        raise ConfigError("workers", workers, "not with --address: the cluster's CPUs decide how many run at once")
    if address and reach:
        try:
            import ray
        except ImportError:
            raise ConfigError("executor", "ray", "local or serial: Ray is not installed "
                                                 "(pip install -r requirements.txt)") from None
        if not ray.is_initialized():
            reachable(address)
    return address


def make_executor(name: str, *, workers: int | None = None, threads: int = 1, address: str | None = None,
                  points: int | None = None) -> Executor:
    """The executor `name` with `threads` torch threads per run; workers default to cores // threads."""
    address = check_executor(name, workers=workers, threads=threads, address=address)
    if name == "serial":
        return SerialExecutor(threads)
    if name == "ray":
        cpus = workers * threads if workers else None
        return RayExecutor(threads, address, cpus)
    workers = workers or max(1, cpu_count() // threads)
    if points is not None:
        workers = max(1, min(workers, points))
    return LocalExecutor(workers, threads)
