"""The Streamlit side of the job manager: one manager per server process, an owner per browser, who may do what.

Ownership. Every job records the owner id of the browser that started it. The
owner id is an HMAC (SHA-256) of the browser's token under a server-side secret:
the token is the random value inside Streamlit's XSRF cookie (`_streamlit_xsrf`,
set by the server on the first page load and sent by the browser with every
later one, so it survives page refreshes and is shared by the tabs of one
browser profile); the secret is 32 random bytes in `<runs>/.cfl-owner-key`
(mode 0600, made on first use), so ids survive a server restart, are useless on
another runs folder, and the token itself is never stored.

Who may do what: the owner controls its live jobs (pause, step, stop), resumes
its interrupted or stopped ones and deletes its ended ones. A link is read
access: whoever opens `?run=<id>` sees the run (the 64 random bits in the id
make a link the only way to find another browser's run) but gets no controls
and no Delete, and the page says why. Runs without an owner (started from the
CLI) belong to whoever runs the terminal: read-only here. The Runs page lists
a browser's own runs, the CLI's, and those it opened by link.

Limits (also in the README): the cookie lives until the browser clears its
session cookies (closing the browser may end it), another browser or profile
is another owner, and anyone using the same browser profile is the owner; with
XSRF protection turned off (`server.enableXsrfProtection=false`) there is no
cookie and ownership lasts for one browser session (a refresh loses it). It is
a rule of this dashboard, not authentication: anyone with a shell on the
machine can do anything to the runs folder.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
from itertools import cycle

import streamlit as st

from ..jobs.manager import JobManager
from ..jobs.run_refs import parse_ref, runs_dir
from ..jobs.snapshots import LIVE, JobSnapshot

OWNER_KEY = "cfl.owner"
OWNER_SOURCE_KEY = "cfl.owner_source"  # "cookie" (the browser's XSRF token) or "session" (no cookie: this session)
SECRET_FILE = ".cfl-owner-key"
KNOWN_KEY = "cfl.known"  # job ids this session may open (its own, and those it opened by link)
SHARED_KEY = "cfl.shared"  # the last configuration used on any page (carried between pages)
WARMUP_ENV = "CFL_UI_WARMUP"  # "0": no background warm-up when the manager starts (tests)


@st.cache_resource(show_spinner=False)
def _manager(root: str) -> JobManager:
    jobs = JobManager(root)
    if os.environ.get(WARMUP_ENV, "1") != "0":
        from .presets import DEFAULT_PRESET, preset_config

        jobs.warm_up(preset_config(DEFAULT_PRESET))  # background: the first Run then starts without one-off costs
        from ..charts.embedding import warm_umap

        warm_umap()  # background too: the first PCA -> UMAP switch then takes about a second, not ~18 s
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


_secret_lock = threading.Lock()
_secrets: dict[str, bytes] = {}


def server_secret(root) -> bytes:
    """The owner-id key of a runs folder: read from <root>/.cfl-owner-key, made (0600) when missing; a folder where
    it cannot be written gets one for this process only (owner ids then last until the server restarts)."""
    path = os.path.join(str(root), SECRET_FILE)
    with _secret_lock:
        if path in _secrets:
            return _secrets[path]
        key = None
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            key = secrets.token_bytes(32)
            with os.fdopen(fd, "wb") as fh:
                fh.write(key.hex().encode())
        except FileExistsError:
            try:
                if not os.path.islink(path):
                    with open(path, "rb") as fh:
                        key = bytes.fromhex(fh.read().decode("ascii").strip())
            except (OSError, ValueError, UnicodeDecodeError):
                key = None
        except OSError:
            key = None
        if not key or len(key) < 16:
            key = secrets.token_bytes(32)
        _secrets[path] = key
        return key


def owner_id(token: str, root) -> str:
    """The owner id of a browser token under the runs folder's secret."""
    return hmac.new(server_secret(root), f"cfl-lab-owner:{token}".encode(), hashlib.sha256).hexdigest()[:32]


def owner() -> str:
    """This browser's owner id (never the cookie itself)."""
    value = st.session_state.get(OWNER_KEY)
    if value is None:
        token = _xsrf_token()
        st.session_state[OWNER_SOURCE_KEY] = "cookie" if token else "session"
        value = owner_id(token or secrets.token_hex(16), runs_dir())
        st.session_state[OWNER_KEY] = value
    return value


def owned_by_session_only() -> bool:
    """True when the browser sent no XSRF cookie: its runs are its own only until this session ends."""
    owner()
    return st.session_state.get(OWNER_SOURCE_KEY) == "session"


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
    """Live controls (pause, step, stop) for the job's owner only; a shared link gives read access."""
    return not snap.from_disk and bool(snap.owner) and snap.owner == owner()


NOT_YOURS = ("Read-only: this run was started in another browser; a shared link lets you watch it, while only the "
             "browser that started it can pause, stop, resume or delete it.")
FROM_CLI = ("Read-only: this run was started from the command line, so it belongs to whoever runs that terminal "
            "(delete its folder or resume it there: `python -m cfl_core run --resume DIR`).")


def why_not_owner(snap: JobSnapshot) -> str | None:
    """None when this browser owns the job, else why it may only look (one line, for the page to show)."""
    if not snap.owner:
        return FROM_CLI
    if snap.owner != owner():
        return NOT_YOURS
    return None


def why_not_delete(snap: JobSnapshot) -> str | None:
    """None when this browser may delete the job now, else why not."""
    from ..jobs.snapshots import ELSEWHERE

    reason = why_not_owner(snap)
    if reason:
        return reason
    if snap.status in LIVE:
        return "Stop the run first."
    if snap.status == ELSEWHERE:
        return "It is still being written by another process."
    return None


def why_not_resume(snap: JobSnapshot) -> str | None:
    """None when this browser may resume the job (read from disk, its own, interrupted or stopped), else why not."""
    from ..jobs.store import resumable

    if not snap.from_disk:
        return "It is running in this server."
    return resumable(snap, owner())


def visible_runs() -> tuple[list, int]:
    """The saved runs this browser sees, newest first (its own, the CLI's, and other browsers' it holds a
    link to), and how many runs of other browsers stay hidden. A sweep is a row of its own (kind "sweep") and its
    runs' rows name it (`sweep`); another browser's sweep is hidden whole, and a link to it or to one of its runs
    shows it whole."""
    from ..jobs.store import list_rows

    jobs = manager()
    live = {j.id: j.status for j in jobs.jobs() if j.status in LIVE}
    rows, hidden = list_rows(jobs.root, owner(), live)
    if hidden:
        everyone, _ = list_rows(jobs.root, None, live)
        mine = {r.ref for r in rows}
        linked = known()

        def opened(r) -> bool:  # a link to the run, or to its sweep or any run of its sweep
            group = r.sweep or (r.ref if r.kind == "sweep" else "")
            return r.job in linked or bool(group) and any(k == group or k.startswith(group + "/") for k in linked)

        rows += [r for r in everyone if r.ref not in mine and opened(r)]
        rows.sort(key=lambda r: (r.created, r.ref), reverse=True)
    return rows, hidden


def shared_config() -> dict | None:
    return st.session_state.get(SHARED_KEY)


def set_shared_config(config: dict) -> None:
    st.session_state[SHARED_KEY] = dict(config)
