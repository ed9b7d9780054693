"""Training outside the server process: one worker process per job, driven round by round over a pipe.

Why: the dashboard's server draws every page in Python threads. Training in
threads of the same process competed with them for the interpreter lock and,
on a small machine, for the cores: with five browsers watching two running
jobs a page took 15-29 s and the health check 6-9 s. A worker process trains
at a lower CPU priority (`nice`, $CFL_UI_WORKER_NICE, default 10), so the
server and the browsers are served first and training takes what is left.

Processes come from a fork server that has already imported torch and the
core (`multiprocessing`'s forkserver, preloaded with this module), so a job
starts in milliseconds rather than the seconds an import takes. The worker
writes the run folder itself (the core's RunWriter, as the CLI does) and sends
each finished round back as its JSON line; a worker whose server died exits
(it is killed with its fork server, and it stops when its pipe closes).

The protocol (server -> worker, each answered once):
    ("open", unit, config dict, folder, resume)  -> ("ok", meta, rounds done)
    ("step", unit)                               -> ("ok", record JSON, done, summary or None)
    ("close", unit, status)                      -> ("ok", summary or None)
    ("keep", [data keys])                        -> ("ok",)   drop the other data set-ups
    ("exit",)                                    -> (no answer)
and an error as ("error", status "failed" or "diverged", message, traceback or None, summary or None).
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import traceback

NICE_ENV = "CFL_UI_WORKER_NICE"
PRELOAD = ["cfl_core.experiment", "cfl_ui.jobs.worker"]

_context_lock = threading.Lock()
_context = None
_start_lock = threading.Lock()


@contextlib.contextmanager
def _without_main():
    """Start processes without re-running the parent's main script in them.

    multiprocessing re-imports the parent's `__main__` in the fork server and in each child;
    under Streamlit that module is the page script (app.py), which must never run there."""
    from multiprocessing import spawn

    original = spawn.get_preparation_data

    def prepare(name):
        data = original(name)
        for key in ("init_main_from_path", "init_main_from_name", "main_path"):
            data.pop(key, None)
        return data

    with _start_lock:
        spawn.get_preparation_data = prepare
        try:
            yield
        finally:
            spawn.get_preparation_data = original


def context():
    """The forkserver context (started once per server process, preloaded with torch and the core)."""
    global _context
    with _context_lock:
        if _context is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(PRELOAD)
            _context = ctx
        return _context


def readable(exc: BaseException) -> str:
    """One line a person can act on: the message of our own errors, type and message otherwise."""
    from cfl_core.errors import ConfigError, DataUnavailable, ResumeError
    from cfl_core.records import RunFolderError

    if isinstance(exc, (ConfigError, DataUnavailable, ResumeError, RunFolderError)):
        return str(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class WorkerError(Exception):
    """A unit that failed or diverged in the worker: its status, message, traceback and summary."""

    def __init__(self, status: str, message: str, tb: str | None, summary: dict | None):
        super().__init__(message)
        self.status, self.message, self.traceback, self.summary = status, message, tb, summary


class WorkerGone(Exception):
    """The worker process ended without answering (killed, out of memory)."""


class Worker:
    """The server's handle on one worker process. Calls block (in the job's thread) until the worker answers."""

    def __init__(self, torch_threads: int = 1, nice: int | None = None):
        ctx = context()
        self._conn, child = ctx.Pipe()
        if nice is None:
            env = os.environ.get(NICE_ENV, "10")
            nice = int(env) if env.lstrip("-").isdigit() else 10
        self.process = ctx.Process(target=_main, args=(child, torch_threads, nice), name="cfl-worker", daemon=True)
        with _without_main():
            self.process.start()
        child.close()
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def call(self, *message):
        with self._lock:
            try:
                self._conn.send(message)
                answer = self._conn.recv()
            except (EOFError, OSError, BrokenPipeError):
                code = self.process.exitcode
                raise WorkerGone(f"the training process ended unexpectedly (exit code {code})") from None
        if answer[0] == "error":
            raise WorkerError(*answer[1:])
        return answer[1:]

    def close(self, timeout: float = 5.0) -> None:
        try:
            with self._lock:
                self._conn.send(("exit",))
        except (OSError, BrokenPipeError):
            pass
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(2)
        try:
            self._conn.close()
        except OSError:
            pass


# -- the worker process ---------------------------------------------------------------------------------
def _die_with_parent() -> None:
    """Linux: be killed when the fork server (killed with the dashboard's server) goes away."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _main(conn, torch_threads: int, nice: int) -> None:
    _die_with_parent()
    try:
        os.nice(nice)
    except OSError:
        pass
    import torch

    torch.set_num_threads(max(1, int(torch_threads)))
    state = _WorkerState()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break  # the server is gone
        if message[0] == "exit":
            break
        try:
            answer = state.handle(message)
        except BaseException as exc:  # noqa: BLE001 - every failure goes back as a message
            answer = state.error(message, exc)
        try:
            conn.send(answer)
        except (OSError, BrokenPipeError):
            break
    state.close_all()
    sys.exit(0)


class _WorkerState:
    def __init__(self):
        self.experiments: dict = {}
        self.setups: dict = {}

    def _setup(self, config):
        from cfl_core.experiment import Setup

        key = (config.data_key(), config.device)
        if key not in self.setups:
            self.setups[key] = Setup.build(config)
        return self.setups[key]

    def handle(self, message):
        kind = message[0]
        if kind == "open":
            from cfl_core.config import ExperimentConfig
            from cfl_core.experiment import Experiment

            _, unit, config_dict, folder, resume = message
            config = ExperimentConfig.from_dict(config_dict)
            setup = self._setup(config)
            exp = Experiment.resume(folder, setup=setup) if resume else Experiment(config, out_dir=folder, setup=setup)
            self.experiments[unit] = exp
            return ("ok", exp.meta(), exp.round)
        if kind == "step":
            exp = self.experiments[message[1]]
            record = exp.step()
            summary = None
            if exp.done:
                summary = exp.close()
                del self.experiments[message[1]]
            return ("ok", record.to_json(), summary is not None, summary)
        if kind == "close":
            exp = self.experiments.pop(message[1], None)
            return ("ok", exp.close(message[2]) if exp is not None else None)
        if kind == "keep":
            keep = set(message[1])
            for key in list(self.setups):
                if key not in keep:
                    del self.setups[key]
            return ("ok",)
        raise ValueError(f"unknown worker message {kind!r}")

    def error(self, message, exc: BaseException):
        from cfl_core.errors import Diverged

        unit = message[1] if len(message) > 1 else None
        exp = self.experiments.pop(unit, None) if message[0] in ("open", "step") else None
        if isinstance(exc, Diverged):
            summary = _close(exp, "diverged", str(exc))
            return ("error", "diverged", str(exc), None, summary)
        summary = _close(exp, "failed", readable(exc))
        return ("error", "failed", readable(exc), traceback.format_exc(), summary)

    def close_all(self) -> None:
        for exp in self.experiments.values():
            _close(exp, "stopped", None)
        self.experiments.clear()


def _close(exp, status: str, error: str | None):
    if exp is None:
        return None
    try:
        return exp.close(status, error=error)
    except Exception:
        return None
