"""The preset selector at the top of every sidebar: choosing a preset fills every control of the page.

A training page draws a second one under its title (cfl_ui.form.frame: where the sidebar is hidden) under its own
key; both show the same preset, and choosing in either fills the controls."""
from __future__ import annotations

import streamlit as st

from .controls import FIELDS, apply_config, source_status, values
from .panel import Panel
from .presets import PRESETS, preset_config

NONE = "—"


def preset_picker(panel: Panel, where=None, *, names: list[str] | None = None, on_apply=None,
                  copy: str = "") -> None:
    """The selector and the chosen preset's blurb; `on_apply(preset)` runs after a preset filled the controls.

    copy: a second selector under its own key (e.g. "main"), mirroring the page's one (the blurb is the first's)."""
    where = where or st.sidebar
    names = names or list(PRESETS)
    k = panel.k("preset")
    options = [NONE, *names]
    if st.session_state.get(k) not in options:
        st.session_state[k] = NONE
    shown = panel.k(f"{copy}.preset") if copy else k
    if copy:
        st.session_state[shown] = st.session_state[k]  # before it is drawn: it shows the page's preset

    def _apply():
        name = st.session_state.get(shown)
        st.session_state[k] = name
        if name in PRESETS:
            apply_config(panel.prefix, preset_config(name))
            if on_apply is not None:
                on_apply(PRESETS[name])

    status = source_status()

    def _fmt(name):
        if name == NONE:
            return "— choose a preset —"
        ds = PRESETS[name].config.get("dataset")
        s = status.get(ds)
        return name if s is None or s.available else f"{name}  (needs {ds})"

    where.selectbox("Preset", options, key=shown, on_change=_apply, format_func=_fmt,
                    help="A preset fills every control below; change anything afterwards." if not copy else
                    "A preset fills every control of the page; change anything afterwards.")
    if copy:
        return
    chosen = st.session_state.get(k)
    if chosen in PRESETS:
        modified = _differs(panel.prefix, preset_config(chosen))
        where.caption(PRESETS[chosen].blurb + ("  \n*(modified below)*" if modified else ""))


def _differs(prefix: str, config: dict) -> bool:
    now = values(prefix)
    return any(now.get(k) != v for k, v in config.items() if k in FIELDS and k not in ("options",)) or (
        (now.get("options") or {}) != (config.get("options") or {}))
