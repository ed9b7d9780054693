"""The IFCA-initialisation page's sweep: which sweep folder its form describes, Run / Resume / Stop, the estimate, and
the live progress and results.

    sweep = IfcaSweep.checked(panel)   # the page's form validated (cfl_ui.form.page_choices: its grid)
    sweep.buttons(where)               # Run / Resume and Stop (the page's frame draws them: cfl_ui.form.frame)
    sweep.flash()                      # why the last Run started nothing
    page_body(sweep)                   # the estimate before it runs; progress and results while and after it runs

The form's configs become a sweep spec (ifca_view.sweep_spec) whose folder is a hash of it under the runs
folder's sweeps/, started by the one sweep service (cfl_ui.jobs.sweep_service: the owner rule, memory budget and
queue of runs) on the executor CFL_SWEEP_EXECUTOR names (local by default; ray with CFL_RAY_ADDRESS). The folder is
an ordinary sweep folder: the Sweeps page lists it, and the same settings (here or from a link) show its runs; the
browser that started it stops and resumes it.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import streamlit as st

from cfl_core.files import TABLE_LIMIT, read_text
from cfl_core.errors import ConfigError
from cfl_core.sweep.folder import EVENTS_FILE
from cfl_core.sweep.status import INTERRUPTED, RUNNING, sweep_status

from ..form import session as S
from ..form.page_choices import RUN_KEY, ifca_build, init_algos, init_modes, seeds
from ..form.verdicts import validate
from . import ifca_view as V
from .export_view import made_on_request
from .live_view import live_fragment
from ..charts.literal import md
from ..jobs.run_refs import runs_dir
from ..jobs.snapshots import FINISHED
from ..jobs.sweep_jobs import QUEUED_STATE
from ..jobs.sweep_pool import executor_choice, executor_text, warm_up_enabled
from ..jobs.sweep_service import SweepRefused

POLL_SECONDS = 1.0


def sweep_seconds(folder: Path) -> float | None:
    """The time its drivers spent on the sweep (each session from its start to its end; a running one to now)."""
    text, _ = read_text(folder / EVENTS_FILE, TABLE_LIMIT)  # a regular file only, bounded (a pipe never waited on)
    if text is None:
        return None
    lines = text.splitlines()
    total, start = 0.0, None
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("event") == "start":
            start = event.get("time")
        elif event.get("event") == "end" and start is not None:
            total += event.get("time", start) - start
            start = None
    if start is not None:
        total += time.time() - start
    return total


class IfcaSweep:
    def __init__(self, prefix: str, verdict, algorithms: list, modes: list, seeds):
        self.prefix = prefix
        self.verdict = verdict
        self.root = runs_dir()
        self.executor_error = None
        try:
            self.executor, self.address = executor_choice()
        except ConfigError as exc:
            self.executor, self.address, self.executor_error = None, None, str(exc)
        self.spec = V.sweep_spec(verdict.configs, algorithms, modes, seeds) if verdict.configs else None
        self.rel = V.sweep_folder(self.spec) if self.spec else None
        self.folder = self.root / self.rel if self.rel else None
        self.service = S.manager().sweeps
        self.job = self.service.get(self.rel) if self.rel else None
        self.status = sweep_status(self.folder) if self.folder else None
        # why this browser may not run, resume or stop the form's sweep (another browser's, the command line's)
        self.not_yours = self.service.why_not(self.rel, S.owner()) if self.rel else None
        if self.executor == "local" and warm_up_enabled():
            self.service.warm()  # the workers load torch while the user sets the form up

    @classmethod
    def checked(cls, panel) -> "IfcaSweep":
        """The sweep the page's form describes, validated (each problem by its control)."""
        verdict = validate(panel, ifca_build, parallel=False)
        return cls(panel.prefix, verdict, init_algos(), init_modes(), seeds())

    # -- state ---------------------------------------------------------------------------------------
    @property
    def flash_key(self) -> str:
        return f"{self.prefix}.flash"

    @property
    def estimate_key(self) -> str:
        return f"{self.prefix}.estimate_at_run"

    def state(self) -> str | None:
        """running / finished / stopped / interrupted / failed for the form's sweep, None when it has no folder."""
        if self.job is not None and self.job.active:
            return "running"
        if self.status is None:
            return None
        if self.status.state == RUNNING:
            return "running"  # another driver (the CLI, another server) is writing it
        if self.job is not None and self.job.state in ("stopped", "failed"):
            return self.job.state
        if self.status.state == INTERRUPTED:
            return INTERRUPTED
        return "finished" if self.status.finished == self.status.points else INTERRUPTED

    def left(self) -> int | None:
        if self.status is None:
            return None
        return self.status.points - self.status.finished

    # -- actions ---------------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            estimate = self.estimate()
            self.service.start(self.spec, self.rel, owner=S.owner(), kind="ifca-init", title="IFCA initialisation")
        except (ConfigError, SweepRefused) as exc:  # not this browser's sweep, a point too large: one line
            st.session_state[self.flash_key] = str(exc)
            return
        st.session_state[self.estimate_key] = (self.rel, estimate.seconds if estimate else None)

    def stop(self) -> None:
        reason = self.service.stop(self.rel, S.owner(), wait=10) if self.rel else None
        if reason:  # a stale or forged press: checked again here
            st.session_state[self.flash_key] = f"Not stopped: {reason}"

    # -- drawing ---------------------------------------------------------------------------------------
    def buttons(self, where=None, *, copy: str = "") -> None:
        """Run (or Resume) and Stop, and why Run is disabled; copy: a second set with its own keys ("main": the
        main area's, for windows where the sidebar starts collapsed)."""
        where = where or st.sidebar
        k = f"{self.prefix}{'.' + copy if copy else ''}"
        state = self.state()
        left = self.left()
        resumes = state in ("stopped", INTERRUPTED, "failed") and left
        label = f"Resume ({left} left)" if resumes else "Run"
        blocked = bool(self.verdict.blocked) or self.executor_error is not None or self.not_yours is not None
        # the sidebar's 300 px: Run (or "Resume (12 left)") and Stop each on a row of its own (side by side, Stop was
        # cut to "S"); a copy in the main area has the width for one row
        cols = where.columns([2.6, 1]) if copy else [where, None]
        cols[0].button(label, key=f"{k}.run_btn", type="primary", icon=":material/play_arrow:",
                       on_click=self.run, width="stretch", disabled=blocked or state in ("running", "finished"),
                       help=self.not_yours or "Run the sweep in the background; runs already in its folder are not "
                                              "run again.")
        stop_at = cols[1] or where
        stop_at.button("Stop", key=f"{k}.stop_btn", icon=":material/stop:", on_click=self.stop,
                       width="stretch", disabled=not (self.job is not None and self.job.active) or bool(self.not_yours),
                       help=self.not_yours or "Stop: the finished runs stay saved, and Resume runs the rest.")
        if copy:  # the notes stay in the sidebar, once
            if blocked:
                from ..form.controller import SIDEBAR_NOTE

                where.caption(SIDEBAR_NOTE)
            return
        if self.executor_error:
            where.error(self.executor_error, icon=":material/block:")
        elif self.not_yours:
            where.caption(":material/visibility: " + md(self.not_yours))
        elif self.verdict.blocked:
            if self.verdict.error is None and self.verdict.estimate is not None:
                where.error(self.verdict.blocked, icon=":material/block:")
            else:
                where.caption(":material/warning: Run is disabled until the setting marked above is fixed.")
        elif state == "finished":
            where.caption(":material/check_circle: Every run of these settings is saved (below).")

    def flash(self) -> None:
        message = st.session_state.pop(self.flash_key, None)
        if message:
            st.error(message, icon=":material/warning:")

    def estimate(self):
        """The service's measured estimate of what Run would run now (a resume: only what is not finished)."""
        if not self.verdict.configs or self.executor is None:
            return None
        configs = self.verdict.configs
        if self.status is not None:  # a resume runs only what is not finished
            done = {(r["seed"], r["init"], r["algorithm"]) for r in V.sweep_rows(self.root, self.rel)
                    if r["status"] == FINISHED}
            configs = [c for c in configs if (c.seed, c.init, c.algorithm) not in done] or configs[:1]
        return self.service.estimate(configs)

    def show(self) -> None:
        state = self.state()
        if self.verdict.blocked and state is None:
            st.info("Fix the setting marked in the sidebar to see the sweep and its estimate.",
                    icon=":material/edit:")
            return
        if state is None:
            if self.service.warming():
                # the workers are starting (since the page opened): the estimate shrinks as they do, so it is
                # drawn again every 2 s until they answer, and Run is pressed on a current figure
                st.fragment(self._ready, run_every=2.0)()
            else:
                self._ready()
            return
        if state == "running":
            st.fragment(self._live, run_every=POLL_SECONDS)()
            made_on_request(self.rel, "ifc", lambda: V.results_download(V.sweep_rows(self.root, self.rel, live=True)),
                            done="runs")
        else:
            self._draw(state)

    def _ready(self) -> None:
        with st.spinner("Measuring a run of each algorithm here for the estimate…"):
            est = self.estimate()
        n = len(self.verdict.configs)
        st.info(f"Press **Run**: {n} runs as a sweep on {executor_text(self.executor, self.address)}, in the "
                f"background, results filling in as each finishes. Estimate: "
                f"**{est.describe() if est else '—'}**.", icon=":material/play_circle:")
        if est is not None:
            st.caption(est.basis)

    def _live(self) -> None:
        self.job = self.service.get(self.rel)
        if self.job is None or not self.job.active:  # another driver, or ours just ended: read the folder
            self.status = sweep_status(self.folder)
        state = self.state()
        self._draw(state)
        if state != "running":
            st.rerun()  # the buttons follow (Resume, or nothing left to run)

    def _draw(self, state: str) -> None:
        where = "on " + executor_text(self.job.executor_name, self.job.address) if self.job else "read from disk"
        rows = V.sweep_rows(self.root, self.rel, live=state == "running")
        progress = self.job.progress if self.job is not None else None
        if progress is None and self.status is not None and state == "running":
            progress = {"eta_seconds": self.status.eta_seconds}
        if self.job is not None and self.job.state == QUEUED_STATE:
            position = self.job.position
            st.info(f"Queued: {f'number {position} in line' if position else 'starting'} for a place among the "
                    "jobs and sweeps this server runs at once" + (f" ({self.job.waiting})" if self.job.waiting else "")
                    + ". It starts by itself.", icon=":material/schedule:")
        V.sweep_progress(rows, state=state, progress=progress, elapsed=sweep_seconds(self.folder), where=where)
        shown = st.session_state.get(self.estimate_key)
        if shown and shown[0] == self.rel and shown[1] is not None:
            st.caption(f"Estimated at Run: about {shown[1]:.0f} s. Sweep folder: `{self.rel}` (also on the Sweeps "
                       f"page).")
        else:
            st.caption(f"Sweep folder: `{self.rel}` (also on the Sweeps page).")
        if self.job is not None and self.job.error:
            st.error(f"The sweep stopped: {self.job.error}", icon=":material/error:")
        V.render_rows(rows, self.rel, files=state != "running")


def page_body(sweep: IfcaSweep) -> dict:
    """The page under its header: the form's sweep, or a job of the page's earlier form that a link names; returns
    what the page's link carries beside the form."""
    ref = st.session_state.get(RUN_KEY)
    old = S.snapshot(ref) if ref and sweep.state() is None else None
    if ref and old is None and sweep.state() is None:
        st.warning(f"Run {md(repr(ref))} was not found; its settings are loaded — press **Run** to run them as a "
                   "sweep.", icon=":material/link:")
    if old is not None:
        st.caption("A run of this page's earlier form (a dashboard job), read back; **Run** runs these settings as a "
                   "sweep.")
        live_fragment(ref, V.render, initial_status=old.status)
    else:
        sweep.show()
    return {"run": ref if old is not None else None, "algos": init_algos(), "modes": init_modes(), "seeds": seeds()}

