"""The live view of a job: its status bar, every chart of its runs, redrawn about once a second while it trains.

`live_fragment` polls a job's snapshot in an `st.fragment` and hands it to a
page's render function; `live_view` is the Playground's (and the Runs page's)
render: the status bar and `render_units`, one run or two side by side.
"""
from __future__ import annotations

import dataclasses
import threading
import time

import streamlit as st
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState, get_script_run_ctx

from . import run_charts as R
from ..charts.draw import built_seconds
from .drilldown import panel as drill_panel
from ..charts.literal import md
from ..jobs.poll_pace import PACE, POLL_SECONDS
from ..jobs.snapshots import (DAMAGED, DIVERGED, ELSEWHERE, FAILED, FINISHED, INTERRUPTED, PAUSED, QUEUED, RUNNING,
                              STOPPED, TERMINAL)

POLLING = (QUEUED, RUNNING, ELSEWHERE)
FRAMED = (RUNNING, ELSEWHERE)  # units still growing: every session draws them as of the current frame (below)
STATUS_BADGE = {QUEUED: ":orange-badge[:material/hourglass_top: queued]",
                RUNNING: ":blue-badge[:material/autorenew: running]",
                PAUSED: ":gray-badge[:material/pause: paused]",
                FINISHED: ":green-badge[:material/check_circle: finished]",
                STOPPED: ":gray-badge[:material/stop_circle: stopped]",
                FAILED: ":red-badge[:material/error: failed]",
                DIVERGED: ":red-badge[:material/trending_up: diverged]",
                DAMAGED: ":orange-badge[:material/broken_image: damaged]",
                INTERRUPTED: ":orange-badge[:material/warning: interrupted]",
                ELSEWHERE: ":blue-badge[:material/autorenew: running elsewhere]"}


# What every session draws of a running unit: its records up to the count first seen in the current frame
# (unit -> (when, count, frame seconds)). Sessions poll at their own moments; a job making several rounds a second
# would otherwise give each session's every poll a round count of its own, so the figures cached per round count
# (cfl_ui.charts.draw) would be rebuilt by every session at every poll: with five sessions watching two jobs, building
# plotly figures in the page threads was most of the server's time. Drawn this way, a unit's figures are built at
# most once per frame, however many sessions watch it (and a session's view is at most one frame behind).
#
# A frame lasts POLL_SECONDS, or longer when building the unit's figures took long: at least
# 1 / BUILD_SHARE times the last build's (wall) time, at most MAX_FRAME_SECONDS. Building one unit's six
# figures takes about 0.5 s of this 2-core machine's CPU whatever the round count (plotly's validation), so at one
# frame a second two running jobs asked for more CPU than the machine had and every page waited behind them;
# bounded this way the charts take at most about a quarter of the server's time per unit, and a busier machine
# (a slower build) spaces them out further. The status line still counts every round at every poll.
_FRAMES: dict[tuple, tuple[float, int, float]] = {}
_FRAMES_LOCK = threading.Lock()
BUILD_SHARE = 0.25
MAX_FRAME_SECONDS = 10.0


def _frame_key(unit) -> tuple:
    return unit.ref, unit.folder


def frame(unit, *, every: float = POLL_SECONDS, now: float | None = None):
    """(the running unit as every session draws it in the current frame, whether this call started the frame)."""
    now = time.monotonic() if now is None else now
    have = len(unit.records)
    key = _frame_key(unit)
    started = False
    with _FRAMES_LOCK:
        since, count, span = _FRAMES.get(key, (float("-inf"), have, every))
        if now - since >= max(every, span) or count > have:
            _FRAMES[key] = since, count, span = now, have, span
            started = True
            if len(_FRAMES) > 512:  # forget units nobody drew lately
                for k in [k for k, (t, _, _) in _FRAMES.items() if now - t > 60 * MAX_FRAME_SECONDS]:
                    del _FRAMES[k]
    return (unit if count == have else dataclasses.replace(unit, records=unit.records[:count])), started


def steady(unit, *, every: float = POLL_SECONDS, now: float | None = None):
    """The running unit as every session draws it in this frame (its records cut to the frame's count)."""
    return frame(unit, every=every, now=now)[0]


def built(unit, seconds: float) -> None:
    """Drawing the unit's new frame took `seconds`: its next frame starts no sooner than seconds / BUILD_SHARE."""
    key = _frame_key(unit)
    with _FRAMES_LOCK:
        if key in _FRAMES:
            since, count, _ = _FRAMES[key]
            _FRAMES[key] = since, count, min(MAX_FRAME_SECONDS, max(POLL_SECONDS, seconds / BUILD_SHARE))


def frame_seconds(unit) -> float:
    """How long the unit's current frame lasts (POLL_SECONDS unless its figures were slow to build)."""
    with _FRAMES_LOCK:
        return _FRAMES.get(_frame_key(unit), (0.0, 0, POLL_SECONDS))[2]


def _setting(cfg: dict) -> str:
    return md(f"{cfg.get('dataset')} / {cfg.get('partition')}, {cfg.get('clusters')} clusters × "
              f"{cfg.get('clients_per_cluster')} clients")


def rounds_text(units) -> str:
    """"7 of 20 rounds" for one run; side by side, in each run's own rounds ("7 of 20 rounds each" when they
    keep pace, else per run), never the sum of both runs' rounds."""
    if len(units) == 1:
        u = units[0]
        return f"{min(u.rounds_done, u.total_rounds)} of {u.total_rounds} rounds"
    pairs = {(min(u.rounds_done, u.total_rounds), u.total_rounds) for u in units}
    if len(pairs) == 1:
        done, total = pairs.pop()
        return f"{done} of {total} rounds each"
    return ", ".join(f"{u.label} {min(u.rounds_done, u.total_rounds)} of {u.total_rounds}" for u in units) + " rounds"


def unit_seconds(unit) -> float:
    """A run's own time: its rounds' wall time (the summary's total once it ended), not its batch's."""
    if unit.summary and unit.summary.get("total_seconds") is not None:
        return float(unit.summary["total_seconds"])
    return float(sum(r.seconds or 0.0 for r in unit.records))


def shown_seconds(snap, units) -> float | None:
    """The time the status line shows: the job's elapsed time while this server runs all of it; the shown
    runs' own time for a run read from disk or one run of a batch (a seed opened from the IFCA page)."""
    if snap.from_disk or len(units) < len(snap.units):
        return sum(unit_seconds(u) for u in units)
    return snap.elapsed if snap.started else None


def status_bar(snap, units, *, count_runs: bool = False) -> None:
    """The job's status line, progress, queue position and error.

    count_runs: progress in finished runs (a batch whose results fill in run by run), not in rounds."""
    badge = STATUS_BADGE.get(snap.status, md(snap.status))
    device = md(snap.device or "—")
    cfg = units[0].config
    if count_runs:
        done, total, what = sum(1 for u in units if u.status in TERMINAL), len(units), "runs"
        line = (f"{badge} **{done} of {total} runs done** · {_setting(cfg)}, {md(cfg.get('rounds'))} rounds each · "
                f"device **{device}** · {snap.elapsed:.0f} s")
    else:
        done, total, what = sum(u.rounds_done for u in units), sum(u.total_rounds for u in units) or 1, "rounds"
        names = " vs ".join(md(u.label) for u in units)
        line = f"{badge} **{names}** · {rounds_text(units)} · {_setting(cfg)} · device **{device}**"
        seconds = shown_seconds(snap, units)
        if seconds is not None:
            line += f" · {seconds:.1f} s"
    st.markdown(line)
    if snap.status == INTERRUPTED:
        st.warning("Interrupted: the process running it stopped before this run ended. Every finished round is "
                   "shown (read-only); the browser that started it can resume it from its last finished round "
                   "(**Resume** on the Runs page), or press Run to run the same settings again.",
                   icon=":material/warning:")
    problems = [p for u in units for p in getattr(u, "problems", ())]
    if problems:
        st.warning("**Damaged run folder:** what could be read is shown; skipped: " +
                   "; ".join(md(p) for p in problems[:6]) + (" …" if len(problems) > 6 else ""),
                   icon=":material/broken_image:")
    if snap.status == QUEUED and snap.waiting:
        st.info(md(snap.waiting[0].upper() + snap.waiting[1:]) + ". It starts when a job ends.",
                icon=":material/memory:")
    elif snap.status == QUEUED and snap.queue_position:
        st.info(f"Waiting in the queue: position {snap.queue_position}. At most "
                f"{_capacity()} jobs train at once on this server; yours starts when one ends.",
                icon=":material/hourglass_top:")
    if snap.live:
        st.progress(min(1.0, done / max(1, total)), text=f"{done}/{total} {what}")
    if snap.error:
        # a batch's error already says how many of its runs failed
        what = "**The run diverged:**" if snap.status == DIVERGED else "**The run failed:**"
        st.error(md(snap.error) if count_runs else f"{what} {md(snap.error)}", icon=":material/error:")
        if snap.traceback:
            with st.expander("Details (traceback)"):
                st.code(snap.traceback, language=None)


def _capacity() -> int:
    from ..form.session import manager

    return manager().scheduler.capacity


def render_units(snap, units, key: str, *, live: bool, exports: bool = True) -> None:
    """Every Playground chart for one run, or two side by side."""
    if not units:
        return
    if not any(u.records for u in units):
        if snap.status not in (FAILED, DIVERGED, DAMAGED, INTERRUPTED, STOPPED):
            st.info("Preparing the data and the models; the first round appears in a moment…",
                    icon=":material/hourglass_top:")
        return
    if len(units) == 1:
        u = units[0]
        R.headline(u)
        left, right = st.columns([11, 9], gap="medium")
        with left:
            method = R.method_picker(units, f"{key}.method")
            R.embedding_block(u, f"{key}.{u.ref}", method, live=live)
        with right:
            R.assignment_block(u, f"{key}.{u.ref}", with_area=False)
        c1, c2, c3 = st.columns(3, gap="medium")
        with c1:
            R.area_block(u, f"{key}.{u.ref}")
        R.curves_block(units, key, cols=(c2, c3))
    else:
        cols = st.columns(len(units), gap="large")
        for col, u in zip(cols, units):
            with col:
                st.subheader(md(u.label))
                R.headline(u, columns=3)
        method = R.method_picker(units, f"{key}.method")
        cols = st.columns(len(units), gap="large")
        for col, u in zip(cols, units):
            with col:
                R.embedding_block(u, f"{key}.{u.ref}", method, height=430, live=live)
        cols = st.columns(len(units), gap="large")
        for col, u in zip(cols, units):
            with col:
                R.assignment_block(u, f"{key}.{u.ref}")
        R.curves_block(units, key)
    drill_panel(units, key, chart_keys=[f"{key}.{u.ref}.emb" for u in units])
    latest = [R.unit_extra_views(u, None) for u in units]
    if any(latest):
        st.markdown("#### What else the algorithm recorded")
        per_round = any(v.per_round for views in latest for v in views)
        rnd = R.round_picker(units, f"{key}.round", live) if per_round else None
        for u, views in zip(units, latest):
            if not views:
                continue
            if len(units) > 1:
                st.markdown(f"**{md(u.label)}**")
            R.extras_block(u, f"{key}.{u.ref}", rnd)
    if exports:
        with st.expander("Export", expanded=False):
            R.exports_block(units, key, snap)


def live_fragment(ref: str, render, *, initial_status: str) -> None:
    """Draw a job with `render(snapshot)`, again about once a second while it is queued or running (less often
    when many sessions watch: cfl_ui.jobs.poll_pace).

    When the status changes the whole page reruns once: buttons follow, and polling stops when the job has
    ended."""
    from ..form.session import snapshot

    poll = initial_status in POLLING
    first = snapshot(ref)
    # until the first round is in: polled twice as often (while few watch), so the first plots show without delay
    waiting = {"now": first is not None and first.rounds_done == 0}
    every = _interval(waiting["now"])
    ctx = get_script_run_ctx()
    session = ctx.session_id if ctx is not None else ""

    def body():
        spent, building = time.thread_time(), built_seconds()
        snap = snapshot(ref)
        if snap is None:
            st.warning("This run is gone (deleted?).")
            return
        render(snap)
        if poll and snap.status != initial_status:
            PACE.forget(session)
            st.rerun()
        if waiting["now"] and snap.rounds_done > 0:
            # the usual pace from now on, told to the browser below; not a rerun of the page: every session that
            # opened while the job prepared gets its first round at the same moment, and thirty pages run at once
            # kept the server from answering for a minute (benchmarks/SERVER_LOAD.md)
            waiting["now"] = False
        if poll:
            # what this session's poll cost, less the figures it built for every session (once per job and frame)
            PACE.record(session, (time.thread_time() - spent) - (built_seconds() - building))
            _keep_pace(ref, waiting["now"])

    if poll:
        st.session_state[_pace_key(ref)] = every
        st.fragment(body, run_every=every)()
    else:
        body()


def _pace_key(ref: str) -> str:
    return f"_cfl_poll_every.{ref}"


def _interval(waiting: bool) -> float:
    """The server's poll interval; twice as often (while few watch) until the first round is in, so the first
    plots show without delay."""
    paced = PACE.every()
    return POLL_SECONDS / 2 if waiting and paced <= POLL_SECONDS else paced


def _keep_pace(ref: str, waiting: bool) -> None:
    """Give this session's browser the server's current poll interval when it changed since its last poll (also
    while waiting for a first round: thirty sessions opened together poll at twice the rate)."""
    every = _interval(waiting)
    if st.session_state.get(_pace_key(ref)) == every:
        return
    fragment = ThreadState.get().fragment_id
    ctx = get_script_run_ctx()
    if fragment is None or ctx is None:
        return
    msg = ForwardMsg()  # what st.fragment(run_every=...) sends: the frontend replaces the fragment's timer
    msg.auto_rerun.interval = every
    msg.auto_rerun.fragment_id = fragment
    ctx.enqueue(msg)
    st.session_state[_pace_key(ref)] = every


def live_view(ref: str, unit_name: str | None, key: str, *, initial_status: str, exports: bool = True) -> None:
    """The Playground's status and charts of a job (one unit, or all of them side by side), kept live; a polled
    job's Export section under the fragment (cfl_ui.views.export_view)."""
    from .export_view import running_exports

    polled = initial_status in POLLING

    def units_of(snap):
        units = [snap.unit(unit_name)] if unit_name else list(snap.units)
        return [u for u in units if u is not None]

    def render(snap):
        units = units_of(snap)
        status_bar(snap, units)
        paced = PACE.every()
        frames = [frame(u, every=paced) if u.status in FRAMED else (u, False) for u in units]
        drawn = [u for u, _ in frames]
        started = time.perf_counter()
        render_units(snap, drawn, key, live=snap.live, exports=exports and not polled)
        new = [u for u, fresh in frames if fresh]
        for u in new:  # this session built the new frame's figures: how long they took sets the next frame
            built(u, (time.perf_counter() - started) / len(new))
        slow = max((frame_seconds(u) for u, _ in frames if u.status in FRAMED), default=POLL_SECONDS)
        if polled and paced > 1.5 * POLL_SECONDS and paced >= slow:
            st.caption(f"The charts are redrawn about every {paced:g} s: {PACE.watching()} pages are watching live "
                       "runs on this server, and the redraws share what it can give them (the status line counts "
                       "every round).")
        elif slow > 1.5 * POLL_SECONDS:
            st.caption(f"The charts are redrawn about every {slow:.0f} s while the server is busy (the status "
                       "line counts every round).")

    live_fragment(ref, render, initial_status=initial_status)
    if exports and polled:
        running_exports(ref, units_of, key)
