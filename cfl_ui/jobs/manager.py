"""The job manager: submits jobs, finds them, queues them, and shares data set-ups between them.

Plain Python (threading only, no Streamlit), so it can be tested without a
browser session; the pages keep one manager per server process with
`st.cache_resource` (see cfl_ui.form.session).

    manager = JobManager(runs_dir)
    job = manager.submit([UnitSpec("", config)], kind="playground", title="CLoVE", owner=h)
    job.pause(); job.step(); job.run(); job.stop()
    snap = manager.snapshot(job.id)      # thread-safe, immutable: records so far, status, error
    snap.units[0].records[-1].ari

At most `max_running` jobs train at once, and the memory estimates of the jobs
that hold memory (running, or paused after they started) stay under the
memory limit; the rest wait in a first-come queue whose position (and, when it
is memory they wait for, the numbers) the snapshot reports. A paused job gives
its place up but keeps its memory. A job the process no longer holds is read
back from disk (cfl_ui.jobs.store) read-only; its owner may resume it (`resume`).

Jobs train in worker processes (cfl_ui.jobs.worker) unless `workers="thread"`
($CFL_UI_WORKERS) or an experiment factory other than the core's is given (tests
inject one): then in their own threads of this process.
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
from .run_refs import runs_dir
from .snapshots import DIVERGED, FAILED, FINISHED, LIVE, LOCKSTEP, PENDING, SEQUENTIAL, JobSnapshot, UnitSpec

MAX_RUNNING_ENV = "CFL_UI_MAX_JOBS"
SWITCH_INTERVAL = 1e-4  # seconds; see JobManager.__init__
TORCH_THREADS_ENV = "CFL_UI_TORCH_THREADS"
WORKERS_ENV = "CFL_UI_WORKERS"  # "process" (default) or "thread"
MEMORY_ENV = "CFL_UI_MEMORY_MB"  # the memory limit for all jobs together (default: half the memory free at start)


class MemoryRefused(ValueError):
    """A job whose estimate alone is above the memory limit: it could never start."""


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
    """A first-come queue of at most `capacity` jobs training at once, whose memory estimates (of every job that
    holds memory: running, or paused after it started) stay under `memory_limit` bytes together."""

    def __init__(self, capacity: int, memory_limit: int | None = None):
        self.capacity = max(1, int(capacity))
        self.memory_limit = memory_limit
        self._cond = threading.Condition()
        self._running: set = set()
        self._waiting: list = []
        self._holding: dict = {}  # job -> the bytes its estimate says it holds

    def _fits(self, job) -> bool:
        if self.memory_limit is None or job in self._holding or not self._holding:
            return True  # a job alone always fits: one that cannot is refused when it is submitted
        return sum(self._holding.values()) + job.memory_bytes <= self.memory_limit

    def acquire(self, job, abort: Callable[[], bool]) -> bool:
        with self._cond:
            self._waiting.append(job)
            try:
                while True:
                    if abort():
                        return False
                    if len(self._running) < self.capacity and self._waiting[0] is job and self._fits(job):
                        self._running.add(job)
                        self._holding.setdefault(job, job.memory_bytes)
                        return True
                    self._cond.wait(timeout=0.2)
            finally:
                if job in self._waiting:
                    self._waiting.remove(job)
                self._cond.notify_all()

    def release(self, job) -> None:
        """The job gives its place up (paused or ended); it keeps its memory until `done`."""
        with self._cond:
            self._running.discard(job)
            self._cond.notify_all()

    def done(self, job) -> None:
        """The job ended: its memory is free."""
        with self._cond:
            self._running.discard(job)
            self._holding.pop(job, None)
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def position(self, job) -> int | None:
        with self._cond:
            return self._waiting.index(job) + 1 if job in self._waiting else None

    def waiting_for_memory(self, job) -> str | None:
        """Why a queued job does not start although a place is free: the memory numbers; None otherwise."""
        from .estimate import _bytes

        with self._cond:
            if job not in self._waiting or self._fits(job) or self.memory_limit is None:
                return None
            held = sum(self._holding.values())
        return (f"waiting for memory: this job needs about {_bytes(job.memory_bytes)}, and the jobs holding memory "
                f"here already use {_bytes(held)} of the {_bytes(self.memory_limit)} limit")

    @property
    def running(self) -> int:
        with self._cond:
            return len(self._running)

    @property
    def held_bytes(self) -> int:
        with self._cond:
            return sum(self._holding.values())


class JobManager:
    """Owns the jobs of one server process: submits, finds, and limits how many train at once."""

    def __init__(self, root: str | os.PathLike | None = None, max_running: int | None = None,
                 keep_finished: int = 64, setup_cache: int = 3, experiment_factory=None,
                 switch_interval: float | None = SWITCH_INTERVAL, torch_threads: int | None = None,
                 workers: str | None = None, memory_limit: int | None = None):
        from cfl_core.experiment import Experiment

        self.workers = workers or os.environ.get(WORKERS_ENV) or "process"
        if self.workers not in ("process", "thread"):
            raise ValueError(f"workers must be process or thread, not {self.workers!r}")
        self._default_factory = Experiment
        if experiment_factory is not None and experiment_factory is not Experiment:
            self.workers = "thread"  # an injected experiment lives in this process
        if self.workers == "process":
            switch_interval = None  # no training thread here: Python's default switching suits the pages
        if switch_interval is not None and sys.getswitchinterval() > switch_interval:
            # Training runs thousands of small torch ops per round, each releasing and re-taking the GIL.
            # With the default 5 ms switch interval, any Python work in the page thread (building
            # figures) makes every re-take wait up to 5 ms: a round measured 10-30x slower. 0.1 ms
            # hands the GIL back promptly (measured: 20 IFCA rounds 10.4 s -> 0.5 s while a
            # thread renders 30% of the time).
            sys.setswitchinterval(switch_interval)
        self.torch_threads = limit_torch_threads(torch_threads)
        self.root = Path(root) if root is not None else runs_dir()
        self.root.mkdir(parents=True, exist_ok=True)
        if max_running is None:
            max_running = int(os.environ.get(MAX_RUNNING_ENV) or 2)
        if memory_limit is None:
            from .estimate import memory_limit as free_memory

            env = os.environ.get(MEMORY_ENV, "")
            memory_limit = int(env) * 2**20 if env.isdigit() else free_memory("cpu")
        self.scheduler = Scheduler(max_running, memory_limit)
        self._spare = None  # a worker process started ahead of the next job
        self._spare_lock = threading.Lock()
        self.keep_finished = keep_finished
        self._jobs: "collections.OrderedDict[str, Job]" = collections.OrderedDict()
        self._lock = threading.Lock()
        self._setups: "collections.OrderedDict[tuple, object]" = collections.OrderedDict()
        self._setup_cache = setup_cache
        self._setup_lock = threading.Lock()
        self.experiment_factory = experiment_factory or Experiment
        self._helpers: list[threading.Thread] = []
        self._closed = False
        self._sweeps = None  # the sweep service, made on first use
        # Stop and join the workers before the interpreter tears PyTorch down under them
        # (a daemon thread inside a torch op at exit aborts the process).
        atexit.register(self.shutdown, 5.0)

    @property
    def uses_processes(self) -> bool:
        """Whether jobs train in worker processes (an experiment factory set later, as tests do, means threads)."""
        return self.workers == "process" and self.experiment_factory is self._default_factory

    def new_worker(self):
        """A worker process for a job: the spare one started ahead (then another spare is started), or a new one."""
        from .worker import Worker

        with self._spare_lock:
            spare, self._spare = self._spare, None
        if spare is None or not spare.process.is_alive():
            spare = Worker(self.torch_threads)
        self._start_spare()
        return spare

    def _start_spare(self) -> None:
        def start():
            from .worker import Worker

            try:
                worker = Worker(self.torch_threads)
            except Exception:
                return
            with self._spare_lock:
                if self._spare is None and not self._closed:
                    self._spare = worker
                    return
            worker.close()

        thread = threading.Thread(target=start, name="cfl-spare-worker", daemon=True)
        thread.start()
        self._helpers.append(thread)

    @property
    def sweeps(self):
        """The sweep service (cfl_ui.jobs.sweep_service): every page's sweeps, in this manager's queue and under
        its memory limit, with the owner rule of its runs."""
        with self._lock:
            if self._sweeps is None:
                from .sweep_service import SweepService

                self._sweeps = SweepService(self, SWITCH_INTERVAL)
            return self._sweeps

    # -- jobs ------------------------------------------------------------------
    def submit(self, units: list[UnitSpec], *, kind: str = "playground", title: str = "", owner: str = "",
               schedule: str = LOCKSTEP, start: str = "run", job_id: str | None = None) -> Job:
        """Validate every unit's config (ConfigError before any work), then queue the job.

        start: "run" (train to the end), "pause" (wait for run/step), "step" (one round, then pause).
        """
        from .run_refs import new_job_id

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
        memory = self._memory_of([u.config for u in units], schedule)
        job_id = job_id or new_job_id(title or units[0].config.algorithm)
        job = Job(self, job_id, kind, title or units[0].label or units[0].config.algorithm, list(units),
                  owner, schedule, start, memory_bytes=memory)
        with self._lock:
            self._jobs[job_id] = job
            self._trim()
        job.start()
        return job

    def _memory_of(self, configs, schedule: str) -> int:
        """The job's memory estimate; MemoryRefused when it alone is above the limit (it could never start)."""
        from .estimate import _bytes, estimate

        need = estimate(configs, parallel=schedule == LOCKSTEP).memory_bytes
        limit = self.scheduler.memory_limit
        if limit is not None and need > limit:
            raise MemoryRefused(f"Too large for this machine: this job needs about {_bytes(need)} of memory; the "
                                f"limit for all jobs here is {_bytes(limit)}.")
        return need

    def resume(self, job_id: str, owner: str, start: str = "run") -> Job:
        """Continue a job read from disk (interrupted or stopped) in this process: its finished units keep their
        records, the others go on from their last finished round. Only its owner may (ValueError otherwise)."""
        from cfl_core.config import ExperimentConfig

        from .store import load_job, resumable

        with self._lock:
            if job_id in self._jobs and self._jobs[job_id].status in LIVE:
                raise ValueError("this job is already running here")
        snap = load_job(self.root, job_id)
        why = resumable(snap, owner)
        if why:
            raise ValueError(why)
        specs, restored = [], []
        for u in snap.units:
            config = ExperimentConfig.from_dict(u.config)
            specs.append(UnitSpec(u.name, config, u.label, dict(u.tags)))
            done = u.status in (FINISHED, FAILED, DIVERGED)
            restored.append({"status": u.status if done else PENDING, "records": u.records if done else (),
                             "summary": u.summary if done else None, "meta": u.meta, "error": u.error if done else None,
                             "resume": not done and u.folder is not None and (Path(u.folder) / "config.json").exists()})
            if not done and restored[-1]["resume"]:
                restored[-1]["records"] = u.records  # shown at once; the worker continues after them
        memory = self._memory_of([s.config for s in specs], snap.schedule)
        job = Job(self, job_id, snap.kind, snap.title, specs, snap.owner, snap.schedule, start, restored=restored,
                  created=snap.created, memory_bytes=memory)
        with self._lock:
            self._jobs[job_id] = job
        job.start()
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def snapshot(self, ref: str) -> JobSnapshot | None:
        """The job of a reference (JOB or JOB/UNIT), live from memory or else read from disk."""
        from .run_refs import parse_ref
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
        """Called by a job's worker when it ends: its memory is free, old ended jobs are forgotten (still on disk)."""
        self.scheduler.done(job)
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
        self._closed = True
        if self._sweeps is not None:
            self._sweeps.shutdown()
        for job in self.jobs():
            job.stop()
        deadline = time.time() + timeout
        for job in self.jobs():
            job.join(max(0.0, deadline - time.time()))
        for thread in self._helpers:
            thread.join(max(0.0, deadline - time.time()))
        with self._spare_lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.close()

    def warm_up(self, config: dict, *, background: bool = True):
        """Load `config`'s data and run two throw-away rounds of it, so the first real Run starts at once.

        The first rounds in a process pay one-off costs (loading the data, PyTorch's first calls);
        the page starts this in the background when the manager is created, with the default preset
        (the form's, passed down: the jobs layer knows no presets). Its Setup stays in the shared
        cache, so the default preset's first Run skips building the federation too."""
        def work():
            try:
                from cfl_core.config import ExperimentConfig

                cfg = ExperimentConfig.from_dict(config)
                setup = self.setup_for(cfg)
                exp = self.experiment_factory(cfg.replace(rounds=2), out_dir=None, setup=setup)
                exp.step()
                exp.step()
            except Exception:
                pass  # only an optimisation; a real run reports its own errors

        if self.uses_processes:
            self._start_spare()  # the fork server imports torch and the core once; the spare is ready for a Run
            return None
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
