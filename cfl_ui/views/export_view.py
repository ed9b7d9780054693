"""A running job's Export section: files of the rounds so far, made when asked for, that chromium can download.

Why not the finished job's buttons: a running job's page redraws its charts in a fragment about once a second.
A download button inside it was replaced at every redraw, and a download pressed just before one was lost
("Download.path: canceled"). Drawn outside the fragment, a deferred download (`data` a function, Streamlit 1.67)
still fails: a press reran the page by default, which replaced the function before the browser asked for it (no
download at all); with on_click="ignore" the function runs, but the file it makes is left unreferenced and the
next fragment run's clean-up deletes it, a second or two later, before chromium has fetched it ("canceled"
again). Files made in the page's own run, outside the fragment, stay referenced until the next full run.

So the section has a button that makes the files of the rounds done so far (a full run of the page; nothing is
serialized at a poll, benchmarks/SERVER_LOAD.md) and ordinary download buttons for them, made again at each later
full run until the job ends."""
from __future__ import annotations

import time

import streamlit as st

from . import run_charts as R

ASKED = "cfl.export_asked"  # {job id: when its files were asked for}


def _ask(ref: str) -> None:
    st.session_state.setdefault(ASKED, {})[ref] = time.time()


def made_on_request(ref: str, key: str, make, done: str = "rounds") -> None:
    """An Export expander for something still running (`ref`: a job, a sweep): a button, then `make()`, which draws
    the download buttons of what is done now and returns a caption saying what they hold; `done` names its
    parts ("rounds", "runs")."""
    asked = st.session_state.get(ASKED, {}).get(ref)
    with st.expander("Export", expanded=asked is not None):
        st.button(f"Make the files of the {done} so far" if asked is None else f"Make them again ({done} since)",
                  key=f"{key}.export_now", icon=":material/refresh:", on_click=_ask, args=(ref,),
                  help="It is still running: its files are made when you ask, from what is done by then.")
        if asked is None:
            st.caption("It is still running: the files hold what is done when you press the button.")
            return
        st.caption(f"{make()}, as of {time.strftime('%H:%M:%S')}; once it ends, its whole files.")


def running_exports(ref: str, units_of, key: str, draw=None) -> None:
    """The Export expander of job `ref` while it is polled; units_of(snapshot) -> the units the page shows;
    draw(units, key, snapshot) the page's download buttons, made now (default: the Playground's and Runs' files,
    run_charts.exports_block; Compare passes its own)."""
    from ..form.session import snapshot

    snap = snapshot(ref)
    units = units_of(snap) if snap is not None else []
    if not units:
        return

    def make() -> str:
        (draw or R.exports_block)(units, key, snap)
        rounds = max(len(u.records) for u in units)
        return f"Rounds 0–{rounds - 1}" if rounds else "No round is done yet"

    made_on_request(ref, key, make)
