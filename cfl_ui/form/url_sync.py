"""The page's state in the URL: a link's settings put into the controls, the controls written back, and the links shown.

Every page keeps its whole configuration (and its run) in the query string, so
any picture is a link: `sync_from_url` applies a link when it arrives,
`write_url` makes the URL describe the page after it is drawn, `link_box` shows
it in the sidebar, and `app_url` builds every link: to this page or to another one.
"""
from __future__ import annotations

import json

import streamlit as st

from . import url_codec as qp
from .controls import apply_config, default_config, ensure_state, key, option_key
from ..charts.literal import md
from .presets import DEFAULT_PRESET
from .session import shared_config

PAGE_PATHS = ("compare", "ifca-init", "partitions", "runs", "lessons")  # url paths of the pages (app.py's st.Page)


def sync_from_url(prefix: str, load_run_config=None, page_default: dict | None = None) -> dict | None:
    """On a session's first visit to a page, or when a link with new query params arrives,
    put the URL's configuration into the controls. Returns the page keys found (run, vs, ...)
    when the URL was applied now, None otherwise."""
    current = st.query_params.to_dict()
    written = st.session_state.get(key(prefix, "_written"))
    first = not st.session_state.get(key(prefix, "_init"))
    extra = None
    notes: list[str] = []
    if current and current != written:
        config, extra, problems = qp.decode(current)
        notes += problems
        if not config and extra.get("run") and load_run_config is not None:
            config = load_run_config(extra["run"]) or {}
        if config:
            base = shared_config() or default_config()
            apply_config(prefix, {**base, **config}, notes=notes)
    elif first:
        base = page_default or shared_config()
        if base is None:
            apply_config(prefix, default_config())
            st.session_state[key(prefix, "preset")] = DEFAULT_PRESET
        else:
            apply_config(prefix, base)
        extra = {}
    st.session_state[key(prefix, "_init")] = True
    if extra is not None:
        st.session_state[key(prefix, "_notes")] = notes
    ensure_state(prefix)
    return extra


def add_notes(prefix: str, notes: list[str]) -> None:
    """More lines for the page's "ignored from the link" notes (shown once by show_url_notes)."""
    if notes:
        st.session_state[key(prefix, "_notes")] = (st.session_state.get(key(prefix, "_notes")) or []) + list(notes)


def apply_algo_options(prefix: str, text: str) -> None:
    """Put a link's per-algorithm options ({"flexcfl": {"measure": "madc"}, ...}) into each algorithm's controls."""
    from cfl_core.algorithms import ALGORITHMS

    from cfl_core.errors import shown
    from cfl_core.jsonio import loads_bounded

    try:
        given, why = loads_bounded(text), "not a JSON object"
    except ValueError as exc:  # not JSON, or nested or long past the bounds (100,000 brackets crashed the page)
        given, why = None, str(exc) if not isinstance(exc, json.JSONDecodeError) else "not a JSON object"
    if not isinstance(given, dict):
        add_notes(prefix, [f"algo_options={shown(text)} in the link was ignored ({why})"])
        return
    notes = []
    for algo, opts in given.items():
        if algo not in ALGORITHMS or not isinstance(opts, dict):
            notes.append(f"algo_options for {algo!r} in the link were ignored (not an algorithm's options)")
            continue
        kept, dropped = qp.valid_options(algo, opts)  # each value typed and checked by its declaration
        notes += [f"algo_options {algo}.{name} in the link was ignored ({why})" for name, why in dropped]
        for name, value in kept.items():
            st.session_state[option_key(prefix, algo, name)] = value
    if notes:
        add_notes(prefix, notes)


def algo_options_text(options: dict) -> str | None:
    """The per-algorithm options a link carries (those with a changed option), None when there are none."""
    own = {algo: opts for algo, opts in options.items() if opts}
    return json.dumps(own, sort_keys=True) if own else None


def show_url_notes(prefix: str) -> None:
    """What in the last link applied to this page could not be used (shown once, at the top)."""
    for note in st.session_state.pop(key(prefix, "_notes"), []) or []:
        st.warning(md(note), icon=":material/link:")  # notes echo what the link held: shown literally


def write_url(prefix: str, config: dict, extra: dict | None = None) -> dict:
    """Make the URL describe this page's state (only when it changed)."""
    params = qp.encode(config, extra)
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)
    st.session_state[key(prefix, "_written")] = params
    return params


def _current_url() -> str:
    try:
        return st.context.url or ""
    except Exception:  # no browser context (a bare script run)
        return ""


LINK_OPEN = "cfl.link_box_open"


def link_box(params: dict, note: str = "") -> None:
    """The sidebar's "Link to this page": the page's whole state as a URL, with a copy button.

    Drawn only while the expander is open: `st.code`'s highlighter is the largest script a browser would
    otherwise load and run on every fresh page (1.5 MB, about a quarter of a second here)."""
    with st.sidebar:
        box = st.expander("Link to this page", icon=":material/link:", key=LINK_OPEN, on_change="rerun")
        if box.open:
            with box:
                if note:
                    st.caption(note)  # the page's own words
                st.code(app_url(params, page=None), language=None, wrap_lines=True)


def app_url(query: dict | None = None, page: str | None = "") -> str:
    """The one link builder: an absolute link to a page of this app with query parameters.

    page: the page's url path ("" = the Playground, "lessons", ...), or None for the page shown now (the link
    box). Without a browser's URL (a bare script run) a page's link is relative, and the page's own is on
    localhost."""
    from urllib.parse import urlsplit

    current = _current_url()
    parts = urlsplit(current) if current else None
    if parts is None or not parts.netloc:
        base = "http://localhost:8501/" if page is None else "/" + page
    elif page is None:
        base = f"{parts.scheme}://{parts.netloc}{parts.path}"
    else:
        path = parts.path.rstrip("/")
        last = path.rsplit("/", 1)[-1] if path else ""
        if last in PAGE_PATHS:
            path = path[: -len(last)].rstrip("/")
        base = f"{parts.scheme}://{parts.netloc}{path}/{page}"
    return qp.link(base, {k: str(v) for k, v in (query or {}).items()})
