"""Background jobs: experiments stepped round by round in worker threads.

Plain Python (threading only, no Streamlit), so it can be tested without a
browser session; the pages keep one manager per server process with
`st.cache_resource` (see cfl_ui.session).

    manager = JobManager(runs_dir)
    job = manager.submit([UnitSpec("", config)], kind="playground", title="CLoVE", owner=h)
    job.pause(); job.step(); job.run(); job.stop()
    snap = manager.snapshot(job.id)      # thread-safe, immutable: records so far, status, error
    snap.units[0].records[-1].ari

A job holds one or more *units* (one experiment each, one run folder each):
the Playground submits one (or two, side by side), Compare one per algorithm,
the IFCA-initialisation explorer one per seed x init mode x algorithm. Units
with the same data settings share one `Setup`, so they see identical clients
and start from identical models. `lockstep` jobs advance every unit one round
at a time (curves grow together); `sequential` jobs finish one unit before
starting the next (results fill in as they finish).

At most `max_running` jobs train at once; the rest wait in a first-come queue
whose position the snapshot reports. A paused job gives its place up. Every
round is written to the run folder before it shows in a snapshot, so closing
the tab or restarting the server loses no finished round; a job the process
no longer holds is read back from disk (cfl_ui.store) read-only.
"""
from __future__ import annotations

import atexit
import collections
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Callable

from .paths import UI_FILE, runs_dir
from .snapshots import (  # noqa: F401  (pages import the statuses and UnitSpec from here too)
    FAILED, FINISHED, LIVE, LOCKSTEP, PAUSED, PENDING, QUEUED, RUNNING, SEQUENTIAL, STOPPED, JobSnapshot,
    UnitSnapshot, UnitSpec,
)

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


def readable(exc: BaseException) -> str:
    """One line a person can act on: the message of our own errors, type and message otherwise."""
    from cfl_core.errors import ConfigError, DataUnavailable

    if isinstance(exc, (ConfigError, DataUnavailable)):
        return str(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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


class _Unit:
    def __init__(self, spec: UnitSpec, folder: Path, ref: str):
        self.spec = spec
        self.folder = folder
        self.ref = ref
        self.status = PENDING
        self.exp = None
        self.records: list = []
        self.summary: dict | None = None
        self.meta: dict = {}
        self.error: str | None = None
        self.tb: str | None = None


def data_key(config) -> tuple:
    """Units with equal keys share one Setup: the same clients (the config's data_key) on the same device."""
    return config.data_key(), config.device


class Job:
    """One submitted job; its worker thread steps its units. Control methods are thread-safe."""

    def __init__(self, manager: "JobManager", job_id: str, kind: str, title: str, units: list[UnitSpec],
                 owner: str, schedule: str, start: str):
        self.manager = manager
        self.id = job_id
        self.kind = kind
        self.title = title
        self.owner = owner
        self.schedule = schedule
        self.folder = manager.root / job_id
        self.single = len(units) == 1 and units[0].name == ""
        self._units = [
            _Unit(spec, self.folder if self.single else self.folder / spec.name,
                  job_id if self.single else f"{job_id}/{spec.name}")
            for spec in units
        ]
        self._cond = threading.Condition(threading.RLock())
        self._want = "pause" if start in ("pause", "step") else "run"
        self._steps = 1 if start == "step" else 0
        self._stop = False
        self._status = QUEUED
        self._error: str | None = None
        self._tb: str | None = None
        self._version = 0
        self.created = time.time()
        self.started: float | None = None
        self.ended: float | None = None
        self._setups: dict = {}
        self._write_ui()
        self._thread = threading.Thread(target=self._work, name=f"cfl-job-{job_id[-8:]}", daemon=True)

    # -- controls ------------------------------------------------------------
    def run(self) -> None:
        """Resume (or keep) running every round to the end."""
        with self._cond:
            self._want = "run"
            if self._status == PAUSED:
                self._status = QUEUED  # seen at once by snapshots (the worker confirms it)
            self._touch()
            self._cond.notify_all()

    def pause(self) -> None:
        """Stop after the round in progress; the job keeps its state and gives up its place."""
        with self._cond:
            self._want = "pause"
            self._steps = 0
            self._touch()
            self._cond.notify_all()

    def step(self, rounds: int = 1) -> None:
        """While paused: run `rounds` more rounds, then pause again."""
        with self._cond:
            if self._want == "pause":
                self._steps += max(1, int(rounds))
                if self._status == PAUSED:
                    self._status = QUEUED
                self._touch()
                self._cond.notify_all()

    def stop(self) -> None:
        """End the job after the round in progress; finished rounds stay on disk (status stopped)."""
        with self._cond:
            self._stop = True
            self._touch()
            self._cond.notify_all()
        self.manager.scheduler.wake()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def status(self) -> str:
        with self._cond:
            return self._status

    # -- snapshot ------------------------------------------------------------
    def snapshot(self) -> JobSnapshot:
        with self._cond:
            units = tuple(
                UnitSnapshot(
                    ref=u.ref, name=u.spec.name, label=u.spec.label or u.spec.config.algorithm,
                    tags=dict(u.spec.tags), config=u.spec.config.to_dict(), status=u.status,
                    records=tuple(u.records), total_rounds=u.spec.config.rounds, summary=u.summary,
                    meta=dict(u.meta), error=u.error, traceback=u.tb, folder=str(u.folder),
                )
                for u in self._units
            )
            error, tb = self._error, self._tb
            failed = [u for u in self._units if u.error]
            if error is None and failed:
                if self.single:
                    error, tb = failed[0].error, failed[0].tb
                else:
                    error = f"{len(failed)} of {len(self._units)} runs failed; first: {failed[0].spec.label or failed[0].spec.name}: {failed[0].error}"
                    tb = failed[0].tb
            status = self._status
            version = self._version
        position = self.manager.scheduler.position(self) if status == QUEUED else None
        return JobSnapshot(self.id, self.kind, self.title, status, self.schedule, units, position, error, tb,
                           self.created, self.started, self.ended, version, False, self.owner)

    # -- worker ----------------------------------------------------------------
    def _touch(self) -> None:
        self._version += 1

    def _set_status(self, status: str) -> None:
        with self._cond:
            if self._status != status:
                self._status = status
                self._touch()

    def _work(self) -> None:
        sched = self.manager.scheduler
        holding = False
        try:
            while True:
                with self._cond:
                    while not self._stop and self._want == "pause" and self._steps == 0:
                        if holding:
                            sched.release(self)
                            holding = False
                        self._set_status(PAUSED)
                        self._cond.wait()
                    if self._stop:
                        break
                if not holding:
                    self._set_status(QUEUED)
                    if not sched.acquire(self, abort=lambda: self._stop):
                        break
                    holding = True
                with self._cond:
                    if self._stop:
                        break
                    if self._want == "pause":
                        if self._steps == 0:
                            continue
                        self._steps -= 1
                    if self.started is None:
                        self.started = time.time()
                    self._set_status(RUNNING)
                if not self._advance():
                    break
        except BaseException as exc:  # a failure outside any one unit (should not happen): report it
            with self._cond:
                self._error, self._tb = readable(exc), traceback.format_exc()
        finally:
            try:
                self._finish()
            finally:
                if holding:
                    sched.release(self)

    def _advance(self) -> bool:
        """One round of every unfinished unit (lockstep) or of the current one; False when none is left."""
        active = [u for u in self._units if u.status in (PENDING, RUNNING)]
        if not active:
            return False
        for unit in active if self.schedule == LOCKSTEP else active[:1]:
            self._step_unit(unit)
            with self._cond:
                if self._stop:
                    break
        return any(u.status in (PENDING, RUNNING) for u in self._units)

    def _setup_for(self, config):
        key = data_key(config)
        setup = self._setups.get(key)
        if setup is None:
            setup = self.manager.setup_for(config)
            self._setups[key] = setup
        return setup

    def _step_unit(self, unit: _Unit) -> None:
        try:
            if unit.exp is None:
                setup = self._setup_for(unit.spec.config)
                exp = self.manager.experiment_factory(unit.spec.config, out_dir=unit.folder, setup=setup)
                meta = exp.meta()
                with self._cond:
                    unit.exp, unit.meta, unit.status = exp, meta, RUNNING
                    self._touch()
            record = unit.exp.step()
            with self._cond:
                unit.records.append(record)
                self._touch()
            if unit.exp.done:
                summary = unit.exp.close()
                with self._cond:
                    unit.summary, unit.status, unit.exp = summary, FINISHED, None
                    self._touch()
                self._drop_unused_setups()
        except Exception as exc:
            message, tb = readable(exc), traceback.format_exc()
            summary = None
            if unit.exp is not None:
                try:
                    summary = unit.exp.close("failed")
                except Exception:
                    pass
            with self._cond:
                unit.status, unit.error, unit.tb, unit.exp = FAILED, message, tb, None
                unit.summary = summary
                self._touch()
            self._drop_unused_setups()

    def _drop_unused_setups(self) -> None:
        needed = {data_key(u.spec.config) for u in self._units if u.status in (PENDING, RUNNING)}
        for key in list(self._setups):
            if key not in needed:
                del self._setups[key]

    def _finish(self) -> None:
        with self._cond:
            for unit in self._units:
                if unit.status in (PENDING, RUNNING):
                    if unit.exp is not None:
                        try:
                            unit.summary = unit.exp.close("stopped")
                        except Exception:
                            pass
                        unit.exp = None
                    unit.status = STOPPED
            self._setups.clear()
            statuses = [u.status for u in self._units]
            if self._error is not None:
                status = FAILED
            elif self._stop:
                status = STOPPED
            elif all(s == FAILED for s in statuses) or (self.single and statuses[0] == FAILED):
                status = FAILED
            else:
                status = FINISHED
            self.ended = time.time()
            self._status = status
            self._touch()
        self._write_ui()
        self.manager._job_ended(self)

    def _write_ui(self) -> None:
        """ui.json: what the dashboard knows beyond the core's files (owner, units, errors)."""
        from .store import write_json_atomic

        with self._cond:
            data = {
                "job": self.id, "kind": self.kind, "title": self.title, "owner": self.owner,
                "schedule": self.schedule, "single": self.single, "created": self.created,
                "started": self.started, "ended": self.ended, "status": self._status,
                "error": self._error,
                "units": [
                    {"name": u.spec.name, "label": u.spec.label, "tags": u.spec.tags,
                     "config": u.spec.config.to_dict(), "status": u.status, "error": u.error,
                     "traceback": u.tb}
                    for u in self._units
                ],
            }
        try:
            write_json_atomic(self.folder / UI_FILE, data)
        except OSError:
            pass  # a full or read-only disk must not kill the worker; the records say what ran


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
        job._thread.start()
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

    def live_ids(self) -> set[str]:
        return {j.id for j in self.jobs() if j.status in LIVE}

    def _job_ended(self, job: Job) -> None:
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
            if job._thread.is_alive():
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
