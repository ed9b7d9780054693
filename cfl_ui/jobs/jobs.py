"""A job: one or more experiments stepped round by round in a worker thread, with run/pause/step/stop.

Plain Python (threading only, no Streamlit); the JobManager (cfl_ui.jobs.manager)
creates jobs and owns what they share (the scheduler, the data set-ups).

A job holds one or more *units* (one experiment each, one run folder each):
the Playground submits one (or two, side by side), Compare one per algorithm,
the IFCA-initialisation explorer one per seed x init mode x algorithm. Units
with the same data settings share one `Setup`, so they see identical clients
and start from identical models. `lockstep` jobs advance every unit one round
at a time (curves grow together); `sequential` jobs finish one unit before
starting the next (results fill in as they finish).

Every round is written to the run folder before it shows in a snapshot, so
closing the tab or restarting the server loses no finished round.

Where the rounds are computed: in a worker process per job (cfl_ui.jobs.worker: the
server's own threads only draw pages), or in the job's thread when the manager
says so (`JobManager(workers="thread")`, or an experiment factory a test
injects). A job can also be resumed from its folder (`restored`): finished
units keep their records, the others continue from their checkpoints.
"""
from __future__ import annotations

import json
import threading
import time
import traceback
from pathlib import Path

from .run_refs import UI_FILE
from .snapshots import (DIVERGED, FAILED, FINISHED, LOCKSTEP, PAUSED, PENDING, QUEUED, RUNNING, STOPPED, JobSnapshot,
                        UnitSnapshot, UnitSpec)
from .worker import Worker, WorkerError, WorkerGone, readable

ENDED = (FINISHED, FAILED, DIVERGED, STOPPED)


class _Unit:
    def __init__(self, spec: UnitSpec, folder: Path, ref: str, restored: dict | None = None):
        restored = restored or {}
        self.spec = spec
        self.folder = folder
        self.ref = ref
        self.status = restored.get("status", PENDING)
        self.exp = None  # the Experiment (in-thread runs)
        self.opened = False
        self.resume = bool(restored.get("resume"))  # continue from the folder's checkpoint
        self.records: list = list(restored.get("records", ()))
        self.summary: dict | None = restored.get("summary")
        self.meta: dict = dict(restored.get("meta") or {})
        self.error: str | None = restored.get("error")
        self.tb: str | None = None


class UnitEnded(Exception):
    """A unit that could not go on: failed (with a traceback) or diverged; its summary as written."""

    def __init__(self, status: str, message: str, tb: str | None, summary: dict | None):
        super().__init__(message)
        self.status, self.message, self.traceback, self.summary = status, message, tb, summary


class _ThreadRunner:
    """Experiments stepped in the job's own thread (sharing the manager's data set-ups)."""

    def __init__(self, job):
        self.job = job

    def open(self, unit: _Unit) -> dict:
        from cfl_core.experiment import Experiment

        setup = self.job._setup_for(unit.spec.config)
        try:
            if unit.resume:
                unit.exp = Experiment.resume(unit.folder, setup=setup)
            else:
                unit.exp = self.job.manager.experiment_factory(unit.spec.config, out_dir=unit.folder, setup=setup)
        except Exception as exc:
            raise self._ended(None, exc) from None
        return unit.exp.meta()

    def step(self, unit: _Unit):
        try:
            record = unit.exp.step()
            summary = unit.exp.close() if unit.exp.done else None
        except Exception as exc:
            exp, unit.exp = unit.exp, None
            raise self._ended(exp, exc) from None
        if summary is not None:
            unit.exp = None
        return record, summary

    def close(self, unit: _Unit, status: str) -> dict | None:
        exp, unit.exp = unit.exp, None
        return exp.close(status) if exp is not None else None

    def keep(self, keys) -> None:
        for key in list(self.job._setups):
            if key not in keys:
                del self.job._setups[key]

    def shutdown(self) -> None:
        pass

    @staticmethod
    def _ended(exp, exc: Exception) -> UnitEnded:
        from cfl_core.errors import Diverged

        status = DIVERGED if isinstance(exc, Diverged) else FAILED
        message = str(exc) if status == DIVERGED else readable(exc)
        summary = None
        if exp is not None:
            try:
                summary = exp.close(status, error=message)
            except Exception:
                pass
        return UnitEnded(status, message, None if status == DIVERGED else traceback.format_exc(), summary)


class _ProcessRunner:
    """Experiments stepped in a worker process (cfl_ui.jobs.worker), started when the job first trains."""

    def __init__(self, job):
        self.job = job
        self.worker: Worker | None = None
        self.index = {id(u): i for i, u in enumerate(job._units)}

    def _call(self, unit, *message):
        if self.worker is None:
            self.worker = self.job.manager.new_worker()
        try:
            return self.worker.call(*message)
        except WorkerError as exc:
            raise UnitEnded(exc.status, exc.message, exc.traceback, exc.summary) from None
        except WorkerGone as exc:
            self.worker = None
            raise UnitEnded(FAILED, str(exc), None, None) from None

    def open(self, unit: _Unit) -> dict:
        meta, _ = self._call(unit, "open", self.index[id(unit)], unit.spec.config.to_dict(), str(unit.folder),
                             unit.resume)
        return meta

    def step(self, unit: _Unit):
        from cfl_core.records import RoundRecord

        line, done, summary = self._call(unit, "step", self.index[id(unit)])
        return RoundRecord.from_dict(json.loads(line)), (summary if done else None)

    def close(self, unit: _Unit, status: str) -> dict | None:
        if self.worker is None or not unit.opened:
            return None
        try:
            return self._call(unit, "close", self.index[id(unit)], status)[0]
        except UnitEnded:
            return None

    def keep(self, keys) -> None:
        if self.worker is not None:
            try:
                self.worker.call("keep", list(keys))
            except (WorkerError, WorkerGone):
                pass

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def data_key(config) -> tuple:
    """Units with equal keys share one Setup: the same clients (the config's data_key) on the same device."""
    return config.data_key(), config.device


class Job:
    """One submitted job; its worker thread steps its units. Control methods are thread-safe.

    `manager` is the JobManager that made it: its root folder, scheduler, set-ups and experiment factory."""

    def __init__(self, manager, job_id: str, kind: str, title: str, units: list[UnitSpec],
                 owner: str, schedule: str, start: str, *, restored: list[dict] | None = None,
                 created: float | None = None, memory_bytes: int = 0):
        self.manager = manager
        self.id = job_id
        self.kind = kind
        self.title = title
        self.owner = owner
        self.schedule = schedule
        self.memory_bytes = int(memory_bytes)  # its estimate: what the scheduler counts against the limit
        self.folder = manager.root / job_id
        self.single = len(units) == 1 and units[0].name == ""
        restored = restored or [None] * len(units)
        self._units = [
            _Unit(spec, self.folder if self.single else self.folder / spec.name,
                  job_id if self.single else f"{job_id}/{spec.name}", state)
            for spec, state in zip(units, restored)
        ]
        self._cond = threading.Condition(threading.RLock())
        self._want = "pause" if start in ("pause", "step") else "run"
        self._steps = 1 if start == "step" else 0
        self._stop = False
        self._status = QUEUED
        self._error: str | None = None
        self._tb: str | None = None
        self._version = 0
        self.created = created if created is not None else time.time()
        self.started: float | None = None
        self.ended: float | None = None
        self._paused_total = 0.0  # seconds spent paused after the start (not counted as elapsed)
        self._paused_since: float | None = None
        self._setups: dict = {}
        self._runner = _ProcessRunner(self) if manager.uses_processes else _ThreadRunner(self)
        self._write_ui(create=True)
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

    def start(self) -> None:
        """Start the worker thread (the manager does, once the job is registered)."""
        self._thread.start()

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
        waiting = self.manager.scheduler.waiting_for_memory(self) if status == QUEUED else None
        return JobSnapshot(self.id, self.kind, self.title, status, self.schedule, units, position, error, tb,
                           self.created, self.started, self.ended, version, False, self.owner, waiting,
                           paused=self.paused_seconds())

    def paused_seconds(self, now: float | None = None) -> float:
        """Seconds this job has spent paused since it started (the pause in progress included)."""
        with self._cond:
            extra = 0.0 if self._paused_since is None else (now or time.time()) - self._paused_since
            return self._paused_total + extra

    # -- worker ----------------------------------------------------------------
    def _touch(self) -> None:
        self._version += 1

    def _set_status(self, status: str) -> None:
        with self._cond:
            if self._status != status:
                now = time.time()
                if self._paused_since is not None:
                    self._paused_total += now - self._paused_since
                    self._paused_since = None
                if status == PAUSED and self.started is not None:
                    self._paused_since = now
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
                sched.done(self)

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
            if not unit.opened:
                meta = self._runner.open(unit)
                with self._cond:
                    unit.opened, unit.meta, unit.status = True, meta, RUNNING
                    self._touch()
            record, summary = self._runner.step(unit)
            with self._cond:
                unit.records.append(record)
                if summary is not None:
                    unit.summary, unit.status = summary, FINISHED
                self._touch()
            if summary is not None:
                self._drop_unused_setups()
        except UnitEnded as ended:
            with self._cond:
                unit.status, unit.error, unit.tb = ended.status, ended.message, ended.traceback
                unit.summary = ended.summary
                self._touch()
            self._write_ui()  # the error is on disk at once, even if the server goes down next
            self._drop_unused_setups()

    def _drop_unused_setups(self) -> None:
        needed = {data_key(u.spec.config) for u in self._units if u.status in (PENDING, RUNNING)}
        self._runner.keep(needed)

    def _finish(self) -> None:
        for unit in self._units:
            if unit.status in (PENDING, RUNNING) and unit.opened:
                try:
                    summary = self._runner.close(unit, STOPPED)
                except Exception:
                    summary = None
                with self._cond:
                    unit.summary = summary if summary is not None else unit.summary
        try:
            self._runner.shutdown()
        except Exception:
            pass
        with self._cond:
            for unit in self._units:
                if unit.status in (PENDING, RUNNING):
                    unit.status = STOPPED
            self._setups.clear()
            statuses = [u.status for u in self._units]
            if self._error is not None:
                status = FAILED
            elif self._stop:
                status = STOPPED
            elif all(s in (FAILED, DIVERGED) for s in statuses):
                status = DIVERGED if all(s == DIVERGED for s in statuses) else FAILED
            else:
                status = FINISHED
            self.ended = time.time()
            if self._paused_since is not None:
                self._paused_total += self.ended - self._paused_since
                self._paused_since = None
            self._status = status
            self._touch()
        self._write_ui()
        self.manager.job_ended(self)

    def _write_ui(self, create: bool = False) -> None:
        """ui.json: what the dashboard knows beyond the core's files (owner, units, errors, the server process).

        Only the first write may create the job folder: a folder deleted while the job runs is not
        brought back holding a lone ui.json."""
        from cfl_core.liveness import process_identity

        from .store import write_json_atomic

        if not create and not self.folder.is_dir():
            return
        with self._cond:
            data = {
                "job": self.id, "kind": self.kind, "title": self.title, "owner": self.owner,
                "schedule": self.schedule, "single": self.single, "created": self.created,
                "started": self.started, "ended": self.ended, "status": self._status,
                "paused": self._paused_total,
                "error": self._error, "server": process_identity(),
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
