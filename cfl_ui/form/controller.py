"""One page's job and its Run / Pause / Step / Stop buttons: the one job controller every training page uses.

    ctl = JobController("cmp", "compare", build_configs, units_of, schedule=LOCKSTEP, parallel=True,
                        run_label="Run all")
    ctl.attach(sync_from_url(...))          # a link's run=... (otherwise the session keeps the one it shows)
    verdict = ctl.validate(panel)           # the form checked, each problem by its control
    ctl.buttons(verdict)                    # Run/Resume, Pause, (Step,) Stop and the note under them
    ctl.flash()                             # why the last press submitted nothing
    snap = ctl.snapshot()                   # the job to draw, live or from disk

A training page hands `ctl.validated` to the frame (cfl_ui.form.frame), which draws the buttons in their places.

The controller keeps the job's reference in st.session_state (`<prefix>.run`).
Only the browser that owns the job (cfl_ui.form.session.may_control) gets live
buttons; a link shows the job read-only (the note under the buttons says so)
and a job read from disk never has them. Every callback checks again, so a
press from a stale or forged page does nothing. The buttons' callbacks run
before the page is drawn, so the buttons show the new state at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import streamlit as st

from . import session as S
from .controls import values
from ..charts.literal import md
from ..jobs.run_refs import parse_ref
from ..jobs.snapshots import LIVE, PAUSED, QUEUED, RUNNING
from .verdicts import Verdict, validate, verdict_note

RESUME = "Resume"


# what a copy of the run controls under the title says when Run is disabled (the message is in the sidebar, once)
SIDEBAR_NOTE = (":material/warning: Run is disabled: the sidebar (its button at the top left) says why, next to "
                "the setting.")


@dataclass(frozen=True)
class Buttons:
    """What the buttons show: the first one's label, and which of them are enabled."""

    label: str
    resumes: bool  # Run continues the paused job (rather than submitting a new one)
    run: bool
    pause: bool
    step: bool
    stop: bool


def button_states(status: str | None, *, blocked: bool, same_settings: bool, restart_on_change: bool,
                  run_label: str = "Run") -> Buttons:
    """The buttons for a job in `status` (None: no job this browser may control).

    blocked: the form cannot run as it is. same_settings: the form still describes the paused job.
    restart_on_change: a paused job whose settings were changed is replaced by a new one (the
    Playground) rather than resumed as it was (the batch pages). Resuming needs nothing from the
    form, so a blocked form does not disable Resume; Step from a paused job is offered as Run is."""
    running = status in (QUEUED, RUNNING)
    paused = status == PAUSED
    resumes = paused and (same_settings or not restart_on_change)
    return Buttons(label=RESUME if resumes else run_label, resumes=resumes,
                   run=not running and (resumes or not blocked), pause=running,
                   step=not running and (paused or not blocked), stop=running or paused)


@dataclass
class JobController:
    """Submits a page's job and runs, pauses, steps and stops it.

    build: the form's values -> validated ExperimentConfigs (raises ConfigError), as `verdicts.validate` takes.
    units: those configs -> (UnitSpecs, job title).
    with_step: the page has a Step button (one round, then pause)."""

    prefix: str
    kind: str
    build: Callable[[dict], list]
    units: Callable[[list], tuple]
    schedule: str
    parallel: bool
    run_label: str = "Run"
    run_help: str | None = None
    stop_help: str = "Stop: finished runs and rounds stay saved."
    with_step: bool = False
    restart_on_change: bool = False

    @property
    def run_key(self) -> str:
        return f"{self.prefix}.run"

    @property
    def flash_key(self) -> str:
        return f"{self.prefix}.flash"

    # -- which job -------------------------------------------------------------------------
    def attach(self, extra: dict | None) -> list[str]:
        """Show the run a link carries (read-only unless this browser owns it); returns notes on what was ignored."""
        ref = extra.get("run") if extra is not None else None
        if not ref:
            return []
        if parse_ref(ref) is None:
            return [f"run={ref!r} in the link was ignored (not the reference of a run)"]
        st.session_state[self.run_key] = ref.strip()
        S.remember(ref)
        return []

    def release(self) -> None:
        """Stop showing the job unless it still trains here under this browser's control (an ended job stays
        in Runs), so that the page shows the form's new settings."""
        job = self.job()
        if job is None or job.status not in LIVE:
            st.session_state[self.run_key] = None

    @property
    def ref(self) -> str | None:
        """The reference (JOB or JOB/UNIT) of the job this page shows, if any."""
        return st.session_state.get(self.run_key)

    @property
    def unit_name(self) -> str | None:
        """The unit a reference names (a link to one run of a batch), None for the whole job."""
        parsed = parse_ref(self.ref) if self.ref else None
        return parsed[1] if parsed else None

    def snapshot(self):
        """The shown job as it is now: live from this server, or read from disk; None when there is none."""
        return S.snapshot(self.ref)

    def job(self):
        """The shown job when this browser may control it (live in this server), else None."""
        parsed = parse_ref(self.ref) if self.ref else None
        if not parsed:
            return None
        job = S.manager().get(parsed[0])
        return job if job is not None and S.may_control(job.snapshot()) else None

    def same_settings(self, job) -> bool:
        """Whether the form still describes this job, unit for unit."""
        try:
            configs = self.build(values(self.prefix))
        except (TypeError, ValueError):  # ConfigError is a ValueError
            return False
        return [u.config for u in job.snapshot().units] == [c.to_dict() for c in configs]

    def _buttons(self, job, *, blocked: bool) -> Buttons:
        status = job.status if job is not None else None
        same = status == PAUSED and self.restart_on_change and self.same_settings(job)
        return button_states(status, blocked=blocked, same_settings=same, restart_on_change=self.restart_on_change,
                             run_label=self.run_label)

    # -- actions (the buttons' callbacks) ------------------------------------------------------
    def submit(self, start: str = "run") -> None:
        """A new job from the form (start: "run" or "step"); what stops it is flashed at the top of the page."""
        from ..jobs.estimate import estimate

        try:
            configs = self.build(values(self.prefix))
            units, title = self.units(configs)
        except (TypeError, ValueError) as exc:
            st.session_state[self.flash_key] = str(exc)
            return
        est = estimate(configs, parallel=self.parallel)
        if not est.ok:
            st.session_state[self.flash_key] = est.message()
            return
        from ..jobs.manager import MemoryRefused

        old = self.job()
        if old is not None and old.status in LIVE:
            old.stop()  # new settings replace the paused run (its finished rounds stay on disk)
        try:
            job = S.manager().submit(units, kind=self.kind, title=title, owner=S.owner(), schedule=self.schedule,
                                     start=start)
        except MemoryRefused as exc:  # above the server's budget for all jobs (CFL_UI_MEMORY_MB): said, not raised
            st.session_state[self.flash_key] = str(exc)
            return
        S.remember(job.id)
        st.session_state[self.run_key] = job.id

    def run(self) -> None:
        """Resume the paused job, or submit a new one that trains every round."""
        job = self.job()
        if self._buttons(job, blocked=False).resumes:
            job.run()
        else:
            self.submit("run")

    def step(self) -> None:
        """One round of the paused job, or a new job that pauses after its first round."""
        job = self.job()
        if self._buttons(job, blocked=False).resumes:
            job.step()
        else:
            self.submit("step")

    def pause(self) -> None:
        """Pause after the round in progress."""
        job = self.job()
        if job is not None:
            job.pause()

    def stop(self) -> None:
        """End the job after the round in progress; its finished rounds stay saved."""
        job = self.job()
        if job is not None:
            job.stop()

    # -- drawing ---------------------------------------------------------------------------------
    def validate(self, panel) -> Verdict:
        """The form checked by the page's build (problems shown by their controls) and estimated."""
        return validate(panel, self.build, parallel=self.parallel)

    def validated(self, panel) -> "CheckedForm":
        """The form checked (`validate`), with the controller: the run controls the page's frame draws."""
        return CheckedForm(self, self.validate(panel))

    def buttons(self, verdict: Verdict, where=None, *, copy: str = "") -> None:
        """Run/Resume, Pause, Step (when the page has it) and Stop, and the verdict's note under them.

        copy: a second set of the same buttons (its own widget keys, e.g. "main": the main area's copy for
        windows where the sidebar starts collapsed), drawn in one row."""
        where = where or st.sidebar
        b = self._buttons(self.job(), blocked=bool(verdict.blocked))
        k = f"{self.prefix}{'.' + copy if copy else ''}"
        # labelled in words, two to a row ("Resume" fits a 300-px sidebar): Run (and Step), then Pause and Stop;
        # a copy in the main area has the width for one row
        if copy:
            cols = where.columns(4 if self.with_step else 3)
            top, low = cols[:2] if self.with_step else cols[:1], cols[-2:]
        else:
            top = where.columns(2) if self.with_step else [where]
            low = None  # made after the first row: a block is shown where it is made
        top[0].button(b.label, key=f"{k}.run_btn", type="primary", icon=":material/play_arrow:",
                      on_click=self.run, width="stretch", disabled=not b.run, help=self.run_help)
        if self.with_step:
            top[1].button("Step", key=f"{k}.step_btn", icon=":material/skip_next:", on_click=self.step,
                          disabled=not b.step, help="Run one round, then pause.", width="stretch")
        low = low or where.columns(2)
        low[0].button("Pause", key=f"{k}.pause_btn", icon=":material/pause:", on_click=self.pause,
                      disabled=not b.pause, help="Pause after the round in progress.", width="stretch")
        low[1].button("Stop", key=f"{k}.stop_btn", icon=":material/stop:", on_click=self.stop,
                      disabled=not b.stop, help=self.stop_help, width="stretch")
        if copy:  # the notes stay in the sidebar, once (a setting's message is next to it there)
            if verdict.blocked:
                where.caption(SIDEBAR_NOTE)
            return
        verdict_note(verdict, where)
        shown = self.snapshot() if self.ref else None
        if shown is not None and not shown.from_disk and S.why_not_owner(shown):
            where.caption(":material/visibility: " + S.why_not_owner(shown) + " Run starts a run of your own.")

    def flash(self) -> None:
        """Why the last press of Run or Step submitted nothing (shown once, at the top of the page)."""
        message = st.session_state.pop(self.flash_key, None)
        if message:
            st.error(md(message), icon=":material/warning:")

    def link_extra(self, snap) -> dict:
        """What the page's link carries of the job: its reference, once there is a job to open."""
        return {"run": self.ref if snap is not None else None}


@dataclass
class CheckedForm:
    """A page's controller with its form's verdict: what cfl_ui.form.frame.RunControls asks of a page."""

    controller: JobController
    verdict: Verdict

    def buttons(self, where, *, copy: str = "") -> None:
        self.controller.buttons(self.verdict, where, copy=copy)

    def flash(self) -> None:
        self.controller.flash()
