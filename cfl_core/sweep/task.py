"""One sweep run, as a worker (a pool process, a Ray task or the driver itself) does it.

`run_point(task)` takes a plain dict (the point's key, its config as JSON values and the torch
thread count), runs the experiment without writing anything, and returns a plain dict: the
config, partition, meta and summary as the run folder holds them, every round as its
`rounds.jsonl` line, and the status (a failure is returned with its error, never raised).
Only JSON-able values travel in either direction, so the worker needs no shared file system.

With `partial` (a folder of this machine: the local and serial executors) the run checkpoints there as it goes,
every `save_every` seconds, and a task that finds a checkpointed run of its config there resumes it: a sweep
stopped part way loses at most that much of each run in flight. The result is the same either way.

Records depend on torch's thread count (a reduction split over threads adds in another
order), so every run sets it: the same point gives the same records in any executor only
with the same `threads` (the sweep's --cpus-per-run, 1 by default).
"""
from __future__ import annotations

import os
import platform
import socket
import time
import traceback
from collections import OrderedDict

from ..liveness import exit_with

_SETUPS: OrderedDict = OrderedDict()  # this worker's last set-ups: runs with equal data_key() share one
_KEEP_SETUPS = 2


def _setup(config):
    from ..experiment import Setup

    key = (config.data_key(), config.device)
    setup = _SETUPS.get(key)
    if setup is None:
        setup = Setup.build(config)
        _SETUPS[key] = setup
        while len(_SETUPS) > _KEEP_SETUPS:
            _SETUPS.popitem(last=False)
    else:
        _SETUPS.move_to_end(key)
    return setup


def pin_threads(threads: int) -> None:
    """torch (and the BLAS under it) use exactly `threads` threads in this process."""
    import torch

    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(threads)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def init_worker(threads: int) -> None:
    """A pool worker's initializer: pin the threads before the first run imports anything heavy, and end with
    the process that started the pool."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(threads)
    exit_with()  # a driver killed with SIGKILL cannot shut its pool down: its workers would wait forever
    pin_threads(threads)


def warm_worker() -> dict:
    """Load what a run needs (torch, the engine, the algorithms) in this worker; returns its pid and the CPU
    seconds this process has used so far (its start: the interpreter and these imports)."""
    from .. import algorithms, experiment  # noqa: F401

    cpu = time.process_time()
    time.sleep(0.2)  # hold this worker a moment, so the pool hands the next warm-up to another one
    return {"pid": os.getpid(), "cpu_seconds": cpu}


def _experiment(config, setup, task: dict):
    """(the point's Experiment, the round it starts from): resumed from the task's partial folder when it holds a
    checkpointed run of this config, new there otherwise (what was there discarded), or with no folder at all
    when the task has none or its parent is not a plain directory (never written through a link)."""
    from pathlib import Path

    from ..errors import ResumeError
    from ..experiment import Experiment
    from ..jsonio import read_json
    from .folder import discard, held_elsewhere

    partial = task.get("partial")
    if not partial or not Path(partial).parent.is_dir() or Path(partial).parent.is_symlink():
        return Experiment(config, setup=setup), 0
    path, every = Path(partial), float(task.get("save_every", 0.0))
    plain = path.is_dir() and not path.is_symlink()
    if plain and held_elsewhere(path):
        return Experiment(config, setup=setup), 0  # a stopped sweep's worker still ending there: never share it
    if plain and read_json(path / "config.json") == config.to_dict():
        try:
            exp = Experiment.resume(path, setup=setup, save_every=every)
            return exp, exp.round
        except ResumeError:
            pass  # damaged, finished or another's: the run starts again
    discard(path)
    path.mkdir()
    return Experiment(config, out_dir=path, setup=setup, save_every=every), 0


def run_point(task: dict) -> dict:
    """Run one point; never raises for a failing run (its error comes back in the result)."""
    from ..config import ExperimentConfig
    from ..records import FAILED, FINISHED, summarize

    threads = int(task.get("threads", 1))
    started = time.time()
    clock = time.perf_counter()
    out = {"key": task["key"], "status": FAILED, "error": None, "traceback": None, "config": task["config"],
           "partition": None, "meta": None, "records": [], "summary": None, "threads": threads,
           "host": socket.gethostname(), "pid": os.getpid(), "started_at": started}
    exp = None
    try:
        pin_threads(threads)
        config = ExperimentConfig.from_dict(task["config"])
        setup = _setup(config)
        exp, resumed = _experiment(config, setup, task)
        out["partition"] = setup.partition.to_json()
        out["meta"] = {**exp.meta(), "torch_threads": threads}
        if resumed:
            out["meta"]["resumed"] = [{"round": resumed}]  # as a resumed run's meta.json says
        for _ in exp:
            pass
        out["records"] = [record.to_json() for record in exp.records]  # resumed: the rounds before the stop too
        out["summary"] = exp.close()
        out["meta"].update(exp.training_facts())  # the path as observed over the run
        out["status"] = FINISHED
    except Exception as exc:  # the run failed: say why, keep what it did
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc(limit=20)
        records = exp.records if exp is not None else []
        out["records"] = [record.to_json() for record in records]
        out["summary"] = summarize(task["config"].get("algorithm", "?"), records, FAILED)
        if exp is not None and exp.writer is not None:
            exp.writer.close()  # the partial folder's lock: the driver discards the folder
    except BaseException:  # stopped (Ctrl-C, a cancelled sweep): the checkpoint stays for the next driver, unlocked
        if exp is not None and exp.writer is not None:
            exp.writer.close()
        raise
    out["wall_seconds"] = time.perf_counter() - clock
    out["python"] = platform.python_version()
    return out
