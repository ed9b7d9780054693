"""The job manager: submits jobs, finds them, queues them, and shares data set-ups between them.

Plain Python (threading only, no Streamlit), so it can be tested without a
browser session; the pages keep one manager per server process with
`st.cache_resource` (see cfl_ui.session).

    manager = JobManager(runs_dir)
    job = manager.submit([UnitSpec("", config)], kind="playground", title="CLoVE", owner=h)
    job.pause(); job.step(); job.run(); job.stop()
    snap = manager.snapshot(job.id)      # thread-safe, immutable: records so far, status, error
    snap.units[0].records[-1].ari

At most `max_running` jobs train at once; the rest wait in a first-come queue
whose position the snapshot reports. A paused job gives its place up. A job
the process no longer holds is read back from disk (cfl_ui.store) read-only.
"""
from __future__ import annotations

import atexit
import collections
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from .jobs import Job, data_key
from .paths import runs_dir
from .snapshots import LIVE, LOCKSTEP, SEQUENTIAL, JobSnapshot, UnitSpec

MAX_RUNNING_ENV = "CFL_UI_MAX_JOBS"
SWITCH_INTERVAL = 1e-4  # seconds; see JobManager.__init__
TORCH_THREADS_ENV = "CFL_UI_TORCH_THREADS"


def limit_torch_threads(threads: int | None = None) -> int:
    """Leave CPU for the page and the browser: at most half the cores train ($CFL_UI_TORCH_THREADS overrides).

    The models here are small, so a second intra-op thread gains little, while on a busy machine
    (the server, the browser and other work sharing 2 cores) OpenMP threads that wait for each
    other made rounds 4x slower: 6 short runs took 5.1 s with 2 threads and 1.2-1.4 s with 1."""
    import torch

    if threads is None:
        env = os.environ.get(TORCH_THREADS_ENV)
        threads = int(env) if env and env.isdigit() else max(1, (os.cpu_count() or 2) // 2)
    threads = max(1, int(threads))
    if torch.get_num_threads() > threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()



class Scheduler:
    """A first-come queue of at most `capacity` jobs training at once."""

    def __init__(self, capacity: int):
        self.capacity = max(1, int(capacity))
        self._cond = threading.Condition()
        self._running: set = set()
        self._waiting: list = []

    def acquire(self, job, abort: Callable[[], bool]) -> bool:
        with self._cond:
            self._waiting.append(job)
            try:
                while True:
                    if abort():
                        return False
                    if len(self._running) < self.capacity and self._waiting[0] is job:
                        self._running.add(job)
                        return True
                    self._cond.wait(timeout=0.2)
            finally:
                if job in self._waiting:
                    self._waiting.remove(job)
                self._cond.notify_all()

    def release(self, job) -> None:
        with self._cond:
            self._running.discard(job)
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def position(self, job) -> int | None:
        with self._cond:
            return self._waiting.index(job) + 1 if job in self._waiting else None

    @property
    def running(self) -> int:
        with self._cond:
            return len(self._running)



class JobManager:
    """Owns the jobs of one server process: submits, finds, and limits how many train at once."""

    def __init__(self, root: str | os.PathLike | None = None, max_running: int | None = None,
                 keep_finished: int = 64, setup_cache: int = 3, experiment_factory=None,
                 switch_interval: float | None = SWITCH_INTERVAL, torch_threads: int | None = None):
        if switch_interval is not None and sys.getswitchinterval() > switch_interval:
            # Training runs thousands of small torch ops per round, each releasing and re-taking the GIL.
            # With the default 5 ms switch interval, any Python work in the page thread (building
            # figures) makes every re-take wait up to 5 ms: a round measured 10-30x slower. 0.1 ms
            # hands the GIL back promptly (measured: 20 IFCA rounds 10.4 s -> 0.5 s while a
            # thread renders 30% of the time).
            sys.setswitchinterval(switch_interval)
        limit_torch_threads(torch_threads)
        self.root = Path(root) if root is not None else runs_dir()
        self.root.mkdir(parents=True, exist_ok=True)
        if max_running is None:
            max_running = int(os.environ.get(MAX_RUNNING_ENV) or 2)
        self.scheduler = Scheduler(max_running)
        self.keep_finished = keep_finished
        self._jobs: "collections.OrderedDict[str, Job]" = collections.OrderedDict()
        self._lock = threading.Lock()
        self._setups: "collections.OrderedDict[tuple, object]" = collections.OrderedDict()
        self._setup_cache = setup_cache
        self._setup_lock = threading.Lock()
        if experiment_factory is None:
            from cfl_core.experiment import Experiment

            experiment_factory = Experiment
        self.experiment_factory = experiment_factory
        self._helpers: list[threading.Thread] = []
        # Stop and join the workers before the interpreter tears PyTorch down under them
        # (a daemon thread inside a torch op at exit aborts the process).
        atexit.register(self.shutdown, 5.0)

    # -- jobs ------------------------------------------------------------------
    def submit(self, units: list[UnitSpec], *, kind: str = "playground", title: str = "", owner: str = "",
               schedule: str = LOCKSTEP, start: str = "run", job_id: str | None = None) -> Job:
        """Validate every unit's config (ConfigError before any work), then queue the job.

        start: "run" (train to the end), "pause" (wait for run/step), "step" (one round, then pause).
        """
        from .paths import new_job_id

        if not units:
            raise ValueError("a job needs at least one unit")
        names = [u.name for u in units]
        if len(set(names)) != len(names) or (len(units) > 1 and "" in names):
            raise ValueError(f"unit names must be distinct and non-empty in a batch: {names}")
        if schedule not in (LOCKSTEP, SEQUENTIAL):
            raise ValueError(f"schedule must be {LOCKSTEP} or {SEQUENTIAL}")
        if start not in ("run", "pause", "step"):
            raise ValueError("start must be run, pause or step")
        for unit in units:
            unit.config.validate()
        job_id = job_id or new_job_id(title or units[0].config.algorithm)
        job = Job(self, job_id, kind, title or units[0].label or units[0].config.algorithm, list(units),
                  owner, schedule, start)
        with self._lock:
            self._jobs[job_id] = job
            self._trim()
        job.start()
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def snapshot(self, ref: str) -> JobSnapshot | None:
        """The job of a reference (JOB or JOB/UNIT), live from memory or else read from disk."""
        from .paths import parse_ref
        from .store import load_job

        parsed = parse_ref(ref)
        if parsed is None:
            return None
        job = self.get(parsed[0])
        if job is not None:
            return job.snapshot()
        return load_job(self.root, parsed[0])

    def jobs(self, owner: str | None = None) -> list[Job]:
        with self._lock:
            jobs = list(self._jobs.values())
        return [j for j in jobs if owner is None or j.owner == owner]

    def job_ended(self, job: Job) -> None:
        """Called by a job's worker when it ends: old ended jobs are forgotten (still on disk)."""
        with self._lock:
            self._trim()

    def _trim(self) -> None:
        ended = [jid for jid, j in self._jobs.items() if j.ended is not None]
        for jid in ended[: max(0, len(ended) - self.keep_finished)]:
            del self._jobs[jid]  # still on disk: snapshot() reads it back

    def forget(self, job_id: str) -> None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None and job.status not in LIVE:
                del self._jobs[job_id]

    def shutdown(self, timeout: float = 10.0) -> None:
        for job in self.jobs():
            job.stop()
        deadline = time.time() + timeout
        for job in self.jobs():
            job.join(max(0.0, deadline - time.time()))
        for thread in self._helpers:
            thread.join(max(0.0, deadline - time.time()))

    def warm_up(self, config=None, *, background: bool = True):
        """Load the default data and run two throw-away rounds, so the first real Run starts at once.

        The first rounds in a process pay one-off costs (loading the data, PyTorch's first calls);
        the page starts this in the background when the manager is created. The default preset's
        Setup stays in the shared cache, so its first Run skips building the federation too."""
        def work():
            try:
                from cfl_core.config import ExperimentConfig

                from .presets import DEFAULT_PRESET, preset_config

                cfg = config or ExperimentConfig.from_dict(preset_config(DEFAULT_PRESET))
                setup = self.setup_for(cfg)
                exp = self.experiment_factory(cfg.replace(rounds=2), out_dir=None, setup=setup)
                exp.step()
                exp.step()
            except Exception:
                pass  # only an optimisation; a real run reports its own errors

        if not background:
            work()
            return None
        thread = threading.Thread(target=work, name="cfl-warm-up", daemon=True)
        thread.start()
        self._helpers.append(thread)
        return thread

    # -- shared data -------------------------------------------------------------
    def setup_for(self, config):
        """A Setup (data, partition, federation) shared by every job with the same data settings."""
        from cfl_core.experiment import Setup

        key = data_key(config)
        with self._setup_lock:
            setup = self._setups.get(key)
            if setup is not None:
                self._setups.move_to_end(key)
                return setup
        setup = Setup.build(config)
        with self._setup_lock:
            self._setups[key] = setup
            while len(self._setups) > self._setup_cache:
                self._setups.popitem(last=False)
        return setup
