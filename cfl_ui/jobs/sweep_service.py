"""The one sweep service: every page that starts a sweep (the IFCA-initialisation page, the Sweeps page's *Start a
sweep*, anything later) starts, stops, resumes and deletes it here, under the rules runs follow.

    service = manager.sweeps                              # one per job manager (cfl_ui.jobs.manager)
    plan = service.plan(spec)                             # every point checked: SweepRefused / ConfigError, one line
    job = service.start(spec, "sweeps/NAME", owner=me, kind="sweeps", title="NAME")
    service.stop(rel, me); service.resume(rel, me); service.delete(rel, me)   # None, or why not (one line)
    service.estimate(configs)                             # measured here (cfl_ui.jobs.sweep_estimate)

- The owner rule of runs: the browser that starts a sweep owns it (ui-sweep.json, cfl_ui.jobs.sweep_owner) and alone
  may stop, resume or delete it; a sweep folder without an owner is the command line's, read-only here.
- The memory estimate, budget and queue of runs: each point is estimated as the Playground estimates a run
  (cfl_ui.jobs.estimate) and refused with the estimate and the limit where the Playground would refuse it, or where
  it alone is above the manager's memory limit ($CFL_UI_MEMORY_MB). A sweep keeps as many runs in flight as its
  executor has slots and the limit holds, waits in the manager's first-come queue for a place (and for its memory)
  like a run, and counts against both while it runs.
Plain Python (no Streamlit).
"""
from __future__ import annotations

import json
import shutil
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from cfl_core.errors import ConfigError
from cfl_core.sweep.executors import cpu_count

from .sweep_jobs import SweepJob
from .sweep_owner import SWEEP_UI_FILE, read_sweep_ui, sweep_owner, why_not_sweep_owner, write_sweep_ui
from .sweep_pool import executor_choice, kept_pool

MAX_POINTS = 500  # a sweep started from a page (the CLI's limit is --max-points)
SPEC_FILE = "spec.json"
KEEP_ENDED = 64  # ended sweeps kept in memory (how they ended: stopped, failed and why); older ones are read from disk


class SweepRefused(ValueError):
    """A sweep that may not start: not this browser's, or a point too large for this machine (one line why)."""


@dataclass(frozen=True)
class SweepPlan:
    spec: object  # cfl_core.sweep.SweepSpec
    configs: list  # every point's config, in order
    executor: str
    address: str | None
    slots: int  # runs in flight at once: the executor's, fewer when the memory limit holds fewer
    point_bytes: int  # the largest point's memory estimate
    memory_bytes: int  # what the sweep holds while it runs (slots x the largest point; 0 on a Ray cluster)


class SweepService:
    """The sweeps of one job manager: they share its queue, its memory limit and its runs folder."""

    def __init__(self, manager, switch_interval: float | None = None):
        if switch_interval is not None and sys.getswitchinterval() > switch_interval:
            sys.setswitchinterval(switch_interval)  # the drivers' threads hand the GIL on promptly (see manager)
        self.manager = manager
        self.root = Path(manager.root)
        self.scheduler = manager.scheduler
        self._lock = threading.Lock()
        self._jobs: dict[str, SweepJob] = {}
        self._estimates: dict[str, object] = {}  # a point's config (less its seed) -> its Estimate

    # -- which sweep ---------------------------------------------------------------------------------
    def folder(self, rel: str) -> Path | None:
        """The folder of a sweep reference (strictly inside the runs folder, never through a link), else None."""
        from .store import safe_folder

        return safe_folder(self.root, rel) if isinstance(rel, str) else None

    def get(self, rel: str) -> SweepJob | None:
        with self._lock:
            return self._jobs.get(rel)

    def jobs(self, owner: str | None = None) -> list[SweepJob]:
        with self._lock:
            jobs = list(self._jobs.values())
        return [j for j in jobs if owner is None or j.owner == owner]

    def owner_of(self, rel: str) -> str:
        """The owner of a sweep: its live job's, else its folder's record ("" = the command line's)."""
        job = self.get(rel)
        if job is not None:
            return job.owner
        folder = self.folder(rel)
        return sweep_owner(folder) if folder is not None else ""

    def why_not(self, rel: str, owner: str) -> str | None:
        """None when `owner` may control the sweep `rel` (or start it: a folder no sweep has), else why not."""
        job = self.get(rel)
        if job is not None:
            return why_not_sweep_owner(job.owner, owner)
        folder = self.folder(rel)
        if folder is None:
            return f"{rel!r} is not a sweep folder's name"
        if not self._taken(folder):
            return None
        return why_not_sweep_owner(sweep_owner(folder), owner)

    @staticmethod
    def _taken(folder: Path) -> bool:
        from cfl_core.sweep.status import MARKERS

        return any((folder / name).exists() or (folder / name).is_symlink() for name in (*MARKERS, SWEEP_UI_FILE))

    def listed(self, owner: str, linked=()) -> tuple[list, int]:
        """The sweep folders `owner` sees (its own, the command line's, and those of other browsers it holds a link
        to: `linked` references), newest first, and how many of other browsers' stay hidden."""
        from cfl_core.sweep.status import list_sweeps

        shown, hidden = [], 0
        for status in list_sweeps(self.root):
            rel = status.folder.relative_to(self.root).as_posix()
            mine = self.owner_of(rel)
            if mine and mine != owner and rel not in linked:
                hidden += 1
                continue
            shown.append(status)
        return shown, hidden

    # -- checks --------------------------------------------------------------------------------------
    def point_estimate(self, config):
        """The Playground's estimate of one point (cached per config less its seed: the seed changes neither)."""
        from .estimate import estimate

        data = config.to_dict()
        data.pop("seed", None)
        key = json.dumps(data, sort_keys=True, default=str)
        hit = self._estimates.get(key)
        if hit is None:
            hit = estimate([config])
            if len(self._estimates) > 2048:
                self._estimates.clear()
            self._estimates[key] = hit
        return hit

    def slots_for(self, configs: list, executor: str, address: str | None, point_bytes: int) -> int:
        """Runs in flight at once: the executor's slots, at most one per point, fewer when the memory limit holds
        fewer (on a Ray cluster its own memory decides)."""
        if executor == "serial":
            slots = 1
        elif executor == "ray":
            slots = _ray_slots()
        else:
            slots = cpu_count()
        slots = max(1, min(slots, len(configs)))
        limit = self.scheduler.memory_limit
        if limit and point_bytes and not (executor == "ray" and address):
            slots = max(1, min(slots, limit // point_bytes))
        return slots

    def plan(self, spec, *, max_points: int | None = MAX_POINTS) -> SweepPlan:
        """The sweep `spec` (a dict or SweepSpec) checked point by point before anything runs: ConfigError for a bad
        spec or executor setting, SweepRefused (with the estimate and the limit) for a point too large here."""
        from cfl_core.sweep import SweepSpec

        from .estimate import _bytes

        sweep = spec if isinstance(spec, SweepSpec) else SweepSpec.from_dict(spec)
        expansion = sweep.expand(max_points=max_points)
        if expansion.invalid:
            raise SweepRefused(expansion.report(limit=5))
        if not expansion.points:
            raise SweepRefused("The sweep has no points.")
        executor, address = executor_choice()
        biggest, worst = 0, None
        for point in expansion.points:
            est = self.point_estimate(point.config)
            if not est.ok:
                raise SweepRefused(f"{est.message()} (the run {_values(point.values)} of this sweep)")
            if est.memory_bytes > biggest:
                biggest, worst = est.memory_bytes, point
        limit = self.scheduler.memory_limit
        if limit is not None and biggest > limit:
            raise SweepRefused(f"Too large for this machine: the run {_values(worst.values)} of this sweep needs about "
                               f"{_bytes(biggest)} of memory; the limit for all jobs here is {_bytes(limit)}.")
        configs = [p.config for p in expansion.points]
        slots = self.slots_for(configs, executor, address, biggest)
        remote = executor == "ray" and bool(address)
        return SweepPlan(sweep, configs, executor, address, slots, biggest, 0 if remote else slots * biggest)

    # -- actions -------------------------------------------------------------------------------------
    def start(self, spec, rel: str, *, owner: str, kind: str, title: str = "",
              max_points: int | None = MAX_POINTS) -> SweepJob:
        """Queue the sweep `spec` into the folder `rel` (under the runs folder) for `owner`: its live job when it
        is already going here; SweepRefused when `owner` may not (another browser's or the command line's sweep),
        or a point is too large; ConfigError for a bad spec."""
        plan = self.plan(spec, max_points=max_points)
        folder = self.folder(rel)
        if folder is None:
            raise SweepRefused(f"{rel!r} is not a sweep folder's name")
        with self._lock:
            job = self._jobs.get(rel)
            if job is not None and job.active:
                if job.owner != owner:
                    raise SweepRefused(why_not_sweep_owner(job.owner, owner))
                return job
            if self._taken(folder):
                reason = why_not_sweep_owner(sweep_owner(folder), owner)
                if reason:
                    raise SweepRefused(reason)
            write_sweep_ui(folder, owner=owner, kind=kind, title=title or plan.spec.name)
            (folder / SPEC_FILE).write_text(json.dumps(plan.spec.raw, indent=1, default=str), encoding="utf-8")
            job = SweepJob(self.scheduler, plan.spec, folder, rel, owner=owner, kind=kind,
                           title=title or plan.spec.name, executor=plan.executor, address=plan.address,
                           slots=plan.slots, memory_bytes=plan.memory_bytes, points=len(plan.configs),
                           max_points=max_points)
            self._jobs[rel] = job
            ended = [k for k, j in self._jobs.items() if not j.active]
            for k in ended[: max(0, len(ended) - KEEP_ENDED)]:
                del self._jobs[k]  # an old ended sweep is read from its folder
        return job.start()

    def resume(self, rel: str, owner: str) -> SweepJob:
        """Run what is not finished of the sweep `rel`, from the spec its folder records (its owner only)."""
        from cfl_core.cli.sweep_cmd import resumed_spec

        reason = self.why_not(rel, owner)
        if reason:
            raise SweepRefused(reason)
        folder = self.folder(rel)
        spec = resumed_spec(folder)  # ConfigError naming what is wrong with the folder's record
        ui = read_sweep_ui(folder)
        kind = ui.get("kind") if isinstance(ui.get("kind"), str) else "sweeps"
        title = ui.get("title") if isinstance(ui.get("title"), str) else spec.name
        return self.start(spec, rel, owner=owner, kind=kind, title=title)

    def stop(self, rel: str, owner: str, wait: float = 0.0) -> str | None:
        """Stop the sweep `rel` running here (its owner only); None when stopped, else why not."""
        job = self.get(rel)
        if job is None or not job.active:
            return "it is not running in this server"
        reason = why_not_sweep_owner(job.owner, owner)
        if reason:
            return reason
        job.stop()
        if wait:
            job.join(wait)
        return None

    def delete(self, rel: str, owner: str) -> str | None:
        """Remove the sweep folder `rel` (its owner only, once it has ended); None when deleted, else why not."""
        from cfl_core.sweep.status import driver_active

        reason = self.why_not(rel, owner)
        if reason:
            return reason
        job = self.get(rel)
        folder = self.folder(rel)
        if (job is not None and job.active) or driver_active(folder):
            return "Stop the sweep first."
        if not self._taken(folder) or not folder.resolve().is_relative_to(self.root.resolve()):
            return "there is no such sweep"
        shutil.rmtree(folder)
        with self._lock:
            self._jobs.pop(rel, None)
        return None

    # -- time ----------------------------------------------------------------------------------------
    def warm(self) -> None:
        """Start the kept pool's workers now when sweeps run on it (they load torch while a form is filled in)."""
        try:
            executor, _ = executor_choice()
        except ConfigError:
            return
        if executor == "local":
            kept_pool().warm()

    def warming(self) -> bool:
        """The kept pool's workers are starting now (an estimate made now counts what is left of their start)."""
        return kept_pool().warming()

    def estimate(self, configs: list, slots: int | None = None):
        """The measured estimate of running `configs` as a sweep here now (cfl_ui.jobs.sweep_estimate), on the
        executor and slots a start would use; None without configs."""
        from .sweep_estimate import ASSUMED_RAY_START_S, ASSUMED_WORKER_START_CPU, sweep_estimate

        if not configs:
            return None
        executor, address = executor_choice()
        if slots is None:
            biggest = max(self.point_estimate(c).memory_bytes for c in configs)
            slots = self.slots_for(configs, executor, address, biggest)
        if executor == "local":
            pool = kept_pool()
            if pool.warm_now():
                return sweep_estimate(configs, executor="local", slots=slots)
            known = pool.worker_start_cpu is not None
            warming = cpu_count() if pool.warming() else 0  # in the load now, and counted as start-up
            return sweep_estimate(configs, executor="local", slots=slots, start_known=known, warming=warming,
                                  warmed_s=pool.warmed_for(),
                                  start_cpu=pool.worker_start_cpu if known else ASSUMED_WORKER_START_CPU)
        if executor == "ray":
            return sweep_estimate(configs, executor="ray", slots=slots, start_wall=ASSUMED_RAY_START_S,
                                  start_known=False)
        return sweep_estimate(configs, executor=executor, slots=1)

    def shutdown(self) -> None:
        for job in self.jobs():
            job.stop()
        for job in self.jobs():
            job.join(5)


def _values(values: dict) -> str:
    from cfl_core.sweep.spec import describe_values

    return describe_values(values) or "(the base settings)"


def _ray_slots() -> int:
    try:
        import ray

        if ray.is_initialized():
            return int(ray.cluster_resources().get("CPU", 1))
    except Exception:
        pass
    return cpu_count()
