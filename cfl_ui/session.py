"""The Streamlit side of the job manager: one manager per server process, an owner per browser, the runs it may
see.

Isolation: every job records the owner hash of the browser that started it.
Pages find a job only by its id (from this session's own list or from the URL
of a shared link: the 64 random bits in the id make a link the only way in);
the Runs page lists a browser's own runs and the runs started outside the
dashboard (the CLI), never another browser's. The owner is derived from the
browser's Streamlit XSRF cookie (stable across refreshes and tabs of one
browser); without it, from this session alone.
"""
from __future__ import annotations

import hashlib
import os
import secrets
from itertools import cycle

import streamlit as st

from .manager import JobManager
from .paths import parse_ref, runs_dir
from .snapshots import LIVE, JobSnapshot

OWNER_KEY = "cfl.owner"
KNOWN_KEY = "cfl.known"  # job ids this session may open (its own, and those it opened by link)
SHARED_KEY = "cfl.shared"  # the last configuration used on any page (carried between pages)
WARMUP_ENV = "CFL_UI_WARMUP"  # "0": no background warm-up when the manager starts (tests)


@st.cache_resource(show_spinner=False)
def _manager(root: str) -> JobManager:
    jobs = JobManager(root)
    if os.environ.get(WARMUP_ENV, "1") != "0":
        jobs.warm_up()  # background: the first Run then starts without one-off costs
    return jobs


def manager() -> JobManager:
    """The process-wide job manager for the current runs folder ($CFL_RUNS_DIR)."""
    return _manager(str(runs_dir()))


def _xsrf_token() -> str | None:
    """The raw token inside Tornado's masked `_streamlit_xsrf` cookie ("2|mask|masked|time")."""
    try:
        cookie = st.context.cookies.get("_streamlit_xsrf")
    except Exception:
        return None
    if not cookie:
        return None
    parts = cookie.split("|")
    try:
        if len(parts) >= 3 and parts[0] == "2":
            mask, masked = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
            return bytes(a ^ b for a, b in zip(masked, cycle(mask))).hex()
    except ValueError:
        pass
    return cookie


def owner() -> str:
    """This browser's owner hash (never the cookie itself)."""
    value = st.session_state.get(OWNER_KEY)
    if value is None:
        token = _xsrf_token() or secrets.token_hex(16)
        value = hashlib.sha256(f"cfl-lab-owner:{token}".encode()).hexdigest()[:24]
        st.session_state[OWNER_KEY] = value
    return value


def known() -> set:
    if KNOWN_KEY not in st.session_state:
        st.session_state[KNOWN_KEY] = set()
    return st.session_state[KNOWN_KEY]


def remember(ref: str) -> None:
    parsed = parse_ref(ref)
    if parsed:
        known().add(parsed[0])


def snapshot(ref: str | None) -> JobSnapshot | None:
    if not ref:
        return None
    return manager().snapshot(ref)


def may_control(snap: JobSnapshot) -> bool:
    """Live controls (pause, step, stop) for the owner and for whoever holds the link."""
    return not snap.from_disk and (snap.owner == owner() or snap.id in known())


def visible_runs() -> tuple[list, int]:
    """The saved runs this browser sees, newest first (its own, the CLI's, and other browsers' it holds a
    link to), and how many runs of other browsers stay hidden."""
    from .store import list_rows

    jobs = manager()
    live = {j.id: j.status for j in jobs.jobs() if j.status in LIVE}
    rows, hidden = list_rows(jobs.root, owner(), live)
    if hidden:
        everyone, _ = list_rows(jobs.root, None, live)
        mine = {r.ref for r in rows}
        rows += [r for r in everyone if r.job in known() and r.ref not in mine]
        rows.sort(key=lambda r: (r.created, r.ref), reverse=True)
    return rows, hidden


def shared_config() -> dict | None:
    return st.session_state.get(SHARED_KEY)


def set_shared_config(config: dict) -> None:
    st.session_state[SHARED_KEY] = dict(config)
