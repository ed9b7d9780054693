"""One training-page frame: the skeleton Playground, Compare and IFCA initialisation share, decided once.

    training_page(TrainingPage(prefix, title, lead, link_note, on_link=..., defaults=...),
                  sidebar=sections,   # panel -> None: the page's own sidebar sections
                  controls=checked,   # panel -> RunControls: the form validated, the page's run controller bound
                  body=draw)          # RunControls -> dict: what the page shows; returns its keys for the link

In this order: the URL's settings into the controls (`sync_from_url`; the page's `on_link` takes its own keys, then
its `defaults`), the sidebar (the run controls first, at its top, then the preset picker and the page's sections),
the header, a copy of the run controls and the preset picker under the title, the link's notes, why the last press
started nothing, the page's body, the URL written back and the link box.

Where the run controls are is decided here and in cfl_ui.charts.theme only: at the top of the sidebar, and under
the title wherever the sidebar is hidden — windows up to NARROW_PX wide (the sidebar starts collapsed) and presenter
mode (no sidebar) — so every training page shows Run, Step, Pause, Stop and the preset picker at every width.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import streamlit as st

from ..charts.theme import RUNBAR_MAIN, RUNBAR_SIDE, page_header
from .controls import values
from .panel import Panel
from .preset_picker import preset_picker
from .url_sync import add_notes, link_box, show_url_notes, sync_from_url, write_url


class RunControls(Protocol):
    """A page's run controller, bound to its validated form (cfl_ui.form.controller, cfl_ui.views.ifca_sweep)."""

    def buttons(self, where, *, copy: str = "") -> None:
        """The run buttons in `where`; copy: a second set under its own widget keys (e.g. "main")."""

    def flash(self) -> None:
        """Why the last press started nothing (shown once, at the top of the page)."""


@dataclass(frozen=True)
class TrainingPage:
    """What a training page brings to the frame besides its sidebar sections, run controls and body.

    load_run_config: a link's run=... -> the config to show when the link carries none (sync_from_url).
    page_default: the page's settings on a first visit without a link (else the last page's, or the default preset).
    on_link: the page keys a link carried (run, vs, algos, ...) -> notes on what was ignored; called when a link
    was applied. defaults: state keys of the page's own choices -> their values before any link set them.
    on_preset: runs after a preset filled the controls (either picker)."""

    prefix: str
    title: str
    lead: str  # HTML (cfl_ui.charts.theme.page_header)
    link_note: str
    load_run_config: Callable | None = None
    page_default: dict | None = None
    on_link: Callable[[dict], list] | None = None
    defaults: dict | None = None
    on_preset: Callable | None = None


def training_page(page: TrainingPage, *, sidebar: Callable[[Panel], None],
                  controls: Callable[[Panel], RunControls], body: Callable[[RunControls], dict]) -> None:
    """Draw a training page around its own parts (see the module's docstring for the order)."""
    panel = Panel(page.prefix)
    extra = sync_from_url(page.prefix, load_run_config=page.load_run_config, page_default=page.page_default)
    if extra is not None and page.on_link is not None:
        add_notes(page.prefix, page.on_link(extra))
    for name, value in (page.defaults or {}).items():
        st.session_state.setdefault(name, list(value) if isinstance(value, list) else value)  # a copy of a list

    with st.sidebar:
        # the run controls first: visible without scrolling at any window height (hidden where the sidebar is:
        # the copy under the title takes their place there, cfl_ui.charts.theme)
        side = st.container(key=RUNBAR_SIDE)
        preset_picker(panel, on_apply=page.on_preset)
        sidebar(panel)
    run = controls(panel)  # after the sidebar: each problem is shown by its control there
    run.buttons(side)

    page_header(page.title, page.lead)
    main = st.container(key=RUNBAR_MAIN)
    picker, buttons = main.columns([1.2, 2.8], vertical_alignment="bottom")
    preset_picker(panel, picker, on_apply=page.on_preset, copy="main")
    run.buttons(buttons, copy="main")
    show_url_notes(page.prefix)
    run.flash()

    link = body(run)
    link_box(write_url(page.prefix, values(page.prefix), link), page.link_note)
