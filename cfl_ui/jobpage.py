"""Run / Pause / Stop for pages that submit a batch job (Compare, IFCA initialisation)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import streamlit as st

from . import controls as C
from .verdicts import verdict_note
from . import session as S
from .estimate import estimate
from .snapshots import LIVE, PAUSED
from .paths import parse_ref


@dataclass
class BatchPage:
    prefix: str
    kind: str
    build_units: Callable[[dict], tuple[list, str]]  # control values -> (UnitSpecs, title); raises ConfigError
    schedule: str
    parallel: bool

    @property
    def run_key(self) -> str:
        return f"{self.prefix}.run"

    @property
    def flash_key(self) -> str:
        return f"{self.prefix}.flash"

    def attach_from_url(self, extra: dict | None) -> None:
        if extra is not None and extra.get("run"):
            st.session_state[self.run_key] = extra["run"]
            S.remember(extra["run"])

    def ref(self) -> str | None:
        return st.session_state.get(self.run_key)

    def job(self):
        parsed = parse_ref(self.ref()) if self.ref() else None
        if not parsed:
            return None
        job = S.manager().get(parsed[0])
        return job if job is not None and S.may_control(job.snapshot()) else None

    # callbacks (run before the page is drawn)
    def _on_run(self) -> None:
        job = self.job()
        if job is not None and job.status == PAUSED:
            job.run()
            return
        try:
            units, title = self.build_units(C.values(self.prefix))
        except Exception as exc:  # ConfigError and friends: shown at the top of the page
            st.session_state[self.flash_key] = str(exc)
            return
        est = estimate([u.config for u in units], parallel=self.parallel)
        if not est.ok:
            st.session_state[self.flash_key] = est.message()
            return
        job = S.manager().submit(units, kind=self.kind, title=title, owner=S.owner(), schedule=self.schedule)
        S.remember(job.id)
        st.session_state[self.run_key] = job.id

    def _on_pause(self) -> None:
        job = self.job()
        if job is not None:
            job.pause()

    def _on_stop(self) -> None:
        job = self.job()
        if job is not None:
            job.stop()

    def buttons(self, verdict, where=None, *, run_label: str = "Run") -> None:
        where = where or st.sidebar
        job = self.job()
        status = job.status if job is not None else None
        running = status in ("queued", "running")
        paused = status == PAUSED
        b1, b2, b3 = where.columns([1.8, 1, 1])
        b1.button("Resume" if paused else run_label, key=f"{self.prefix}.run_btn", type="primary",
                  icon=":material/play_arrow:", on_click=self._on_run, width="stretch",
                  disabled=(bool(verdict.blocked) and not paused) or running)
        b2.button("", key=f"{self.prefix}.pause_btn", icon=":material/pause:", on_click=self._on_pause,
                  disabled=not running, help="Pause after the round in progress.", width="stretch")
        b3.button("", key=f"{self.prefix}.stop_btn", icon=":material/stop:", on_click=self._on_stop,
                  disabled=not (running or paused), help="Stop: finished runs and rounds stay saved.",
                  width="stretch")
        verdict_note(verdict, where)

    def flash(self) -> None:
        message = st.session_state.pop(self.flash_key, None)
        if message:
            st.error(message, icon=":material/warning:")

    def live(self) -> bool:
        snap = S.snapshot(self.ref()) if self.ref() else None
        return snap is not None and snap.status in LIVE
