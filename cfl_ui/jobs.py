"""A job: one or more experiments stepped round by round in a worker thread, with run/pause/step/stop.

Plain Python (threading only, no Streamlit); the JobManager (cfl_ui.manager)
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
"""
from __future__ import annotations

import threading
import time
import traceback
from pathlib import Path

from .paths import UI_FILE
from .snapshots import (FAILED, FINISHED, LOCKSTEP, PAUSED, PENDING, QUEUED, RUNNING, STOPPED, JobSnapshot,
                        UnitSnapshot, UnitSpec)


def readable(exc: BaseException) -> str:
    """One line a person can act on: the message of our own errors, type and message otherwise."""
    from cfl_core.errors import ConfigError, DataUnavailable

    if isinstance(exc, (ConfigError, DataUnavailable)):
        return str(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__



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
    """One submitted job; its worker thread steps its units. Control methods are thread-safe.

    `manager` is the JobManager that made it: its root folder, scheduler, set-ups and experiment factory."""

    def __init__(self, manager, job_id: str, kind: str, title: str, units: list[UnitSpec],
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
                    summary = unit.exp.close(FAILED)
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
                            unit.summary = unit.exp.close(STOPPED)
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
        self.manager.job_ended(self)

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
