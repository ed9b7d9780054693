"""A sweep's controls wherever a page shows one (the Sweeps page, a sweep's row on the Runs page): its owner's Stop,
Resume and Delete (after asking), everyone else's reason why not, and its place in the queue while it waits.

    sweep_actions(rel, status, key, on_deleted)   # status: cfl_core.sweep.status.SweepStatus, or None while queued

Every press is checked again by the sweep service (cfl_ui.jobs.sweep_service) with this browser's owner id, so a
stale or forged page does nothing.
"""
from __future__ import annotations

import streamlit as st

from ..charts.literal import code, md
from ..form import session as S
from ..jobs.sweep_jobs import QUEUED_STATE


def _toast(key: str, text: str) -> None:
    st.session_state[f"{key}.toast"] = text


def _stop(rel: str, key: str) -> None:
    reason = S.manager().sweeps.stop(rel, S.owner(), wait=10)
    _toast(key, f"Not stopped: {reason}" if reason else "Stopped: the finished runs stay; Resume runs the rest.")


def _resume(rel: str, key: str) -> None:
    from cfl_core.errors import ConfigError

    from ..jobs.sweep_service import SweepRefused

    try:
        S.manager().sweeps.resume(rel, S.owner())
        _toast(key, "Resumed: only the runs not finished run.")
    except (ConfigError, SweepRefused) as exc:
        _toast(key, f"Not resumed: {exc}")


def _delete(rel: str, key: str, on_deleted) -> None:
    st.session_state.pop(f"{key}.confirm", None)
    reason = S.manager().sweeps.delete(rel, S.owner())
    _toast(key, f"Not deleted: {reason}" if reason else "Deleted.")
    if reason is None and on_deleted is not None:
        on_deleted()


def queue_note(job) -> None:
    """Where a queued sweep stands (its place in line, the memory numbers when it waits for memory)."""
    if job is None or job.state != QUEUED_STATE:
        return
    position = job.position
    st.info(f"Queued: {f'number {position} in line' if position else 'starting'} for a place among the jobs and "
            "sweeps this server runs at once" + (f" ({job.waiting})" if job.waiting else "") + ". It starts by itself.",
            icon=":material/schedule:")


def sweep_actions(rel: str, status, key: str, on_deleted=None) -> None:
    """Stop / Resume / Delete… for the sweep `rel` (enabled for its owner as its state allows), the reason for
    everyone else, and a note while it is queued."""
    service = S.manager().sweeps
    toast = st.session_state.pop(f"{key}.toast", None)
    if toast:
        st.toast(md(toast), icon=":material/grid_on:")
    job = service.get(rel)
    live = job is not None and job.active
    reason = service.why_not(rel, S.owner())
    running_elsewhere = not live and status is not None and status.state == "running"
    left = (status.points - status.finished) if status is not None else 0
    confirm = f"{key}.confirm"
    if st.session_state.get(confirm) == rel and not reason and not live:
        st.warning(f"Delete the sweep {code(rel)} and all its runs from disk? This cannot be undone.",
                   icon=":material/delete:")
        y, n = st.columns(2)
        y.button("Yes, delete", key=f"{key}.yes", type="primary", width="stretch", on_click=_delete,
                 args=(rel, key, on_deleted))
        if n.button("Cancel", key=f"{key}.no", width="stretch"):
            st.session_state.pop(confirm, None)
            st.rerun()
        return
    a, b, c = st.columns(3)
    a.button("Stop", key=f"{key}.stop", icon=":material/stop:", width="stretch", on_click=_stop, args=(rel, key),
             disabled=bool(reason) or not live,
             help=reason or ("Stop: the finished runs stay saved, and Resume runs the rest." if live else
                             "It is not running in this server."))
    resumable = not live and not running_elsewhere and status is not None and left > 0
    b.button(f"Resume ({left} left)" if resumable else "Resume", key=f"{key}.resume", icon=":material/play_arrow:",
             width="stretch", on_click=_resume, args=(rel, key), disabled=bool(reason) or not resumable,
             help=reason or ("Run only the runs not finished; the finished ones stay." if resumable else
                             "Nothing to resume: it is running, or every run is done."))
    if c.button("Delete…", key=f"{key}.delete", icon=":material/delete:", width="stretch",
                disabled=bool(reason) or live or running_elsewhere,
                help=reason or ("Stop it first." if live or running_elsewhere else
                                "Remove this sweep's folder and all its runs (asks to confirm).")):
        st.session_state[confirm] = rel
        st.rerun()
    if reason:
        st.caption(":material/visibility: " + md(reason))
    elif S.owned_by_session_only():
        st.caption(":material/info: This browser sent no session cookie, so its sweeps are its own only until this "
                   "tab is closed or reloaded.")
    queue_note(job)
