"""A few style touches on top of .streamlit/config.toml (the page below the header bar, calmer metrics, narrow
windows: the sidebar starts collapsed there).

Colours here are never fixed greys: muted text is the theme's own text colour at lower opacity, so it stays
readable in the light and the dark theme alike (the app follows the browser's preference, config.toml)."""
from __future__ import annotations

import streamlit as st

CSS = """
<style>
.block-container {padding-top: 4rem; padding-bottom: 2rem; max-width: 1600px;}
/* Streamlit's header bar (3.75rem, with the sidebar's expand button once it is collapsed) lies over the top of
   the main area: the page starts below it, and a heading scrolled to (a link, scrollIntoView) stops below it */
[data-testid="stMain"], [data-testid="stAppViewContainer"] {scroll-padding-top: 4rem;}
/* the run controls and the preset picker (Playground, Compare, IFCA initialisation; cfl_ui.form.frame): in the
   sidebar, and under the title where the sidebar is hidden: it starts collapsed in windows up to NARROW_PX wide
   (SIDEBAR_JS below), and presenter mode has none (PRESENT_CSS) */
.st-key-cfl-runbar-main {display: none;}
.st-key-cfl-pickers-main {display: none;}
@media (max-width: 1024px) {.st-key-cfl-runbar-main, .st-key-cfl-pickers-main {display: flex;}
  [data-testid="stSidebar"] .st-key-cfl-runbar-side {display: none;}}
.st-key-cfl-sidebar-js {display: none;}
[data-testid="stMetricValue"] {font-size: 1.55rem;}
/* headline numbers never truncate: a value wraps rather than ending in "…", and a row of metrics wraps onto a
   second line when its columns get narrower than a number (800-px windows, zoomed browsers) */
[data-testid="stMetricValue"] > div, [data-testid="stMetricLabel"] p {white-space: normal; overflow: visible;
  text-overflow: clip; overflow-wrap: anywhere;}
/* and so does a delta ("+0.3 pt vs round 3"): it wraps under its number, at a word where it can */
[data-testid="stMetricDelta"], [data-testid="stMetricDelta"] > div, [data-testid="stMetricDelta"] p
  {white-space: normal; overflow: visible; text-overflow: clip; overflow-wrap: break-word; max-width: 100%;
  height: auto;}
[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stMetric"]) {flex-wrap: wrap;
  row-gap: 0.4rem;}
[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stMetric"]) > [data-testid="stColumn"]
  {min-width: 6.6rem;}
@media (max-width: 1100px) {[data-testid="stMetricValue"] {font-size: 1.25rem;}}
[data-testid="stMetricLabel"] p {font-size: 0.82rem; opacity: 0.8;}
[data-testid="stSidebar"] [data-testid="stCaptionContainer"] {margin-top: -0.45rem;}
[data-testid="stSidebar"] h3 {margin-top: 0.3rem; margin-bottom: -0.3rem; font-size: 1.0rem; opacity: 0.9;}
.cfl-muted {opacity: 0.72;}
/* tables (a split log, a lesson's numbers) never run past their column: they scroll inside it */
[data-testid="stMarkdownContainer"] table {display: block; max-width: 100%; overflow-x: auto;}
/* narrow windows (1024-px projectors, 800-px or zoomed browsers): less side padding, and charts placed side by
   side stack once each would get too narrow to read: 280 px for a curve, 400 px for a client embedding (its
   points and its legend side by side; cfl_ui.views.run_charts marks it) */
@media (max-width: 1200px) {.block-container {padding-left: 1.4rem; padding-right: 1.4rem;}}
[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] .stPlotlyChart) {flex-wrap: wrap;}
[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] .stPlotlyChart) > [data-testid="stColumn"]
  {min-width: min(280px, 100%);}
[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] .stPlotlyChart)
  > [data-testid="stColumn"]:has([class*="st-key-cfl-emb"]) {min-width: min(400px, 100%);}
/* a lesson's two heatmaps stay side by side down to 200 px each (cfl_ui.views.lessons_view marks them): stacked, the
   second fell below a 768-px screen */
[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [class*="st-key-cfl-lesson-heat"])
  > [data-testid="stColumn"] {min-width: min(200px, 100%);}
/* the new-client lesson's three small heatmaps (one per algorithm) stay side by side in their half of the page */
[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [class*="st-key-cfl-lesson-unseen"])
  > [data-testid="stColumn"] {min-width: min(120px, 100%);}
div[data-testid="stExpander"] details summary p {font-weight: 600;}
</style>
"""


# presenter mode: no sidebar, text and charts larger for a projector. Text by its font sizes and the charts by
# sizing their figures (PRESENT_SCALE, cfl_ui.charts.draw): never a CSS zoom, under which plotly, laying a chart
# out in the pixels it was given, drew legends, colour bars and the replay's slider past the chart's box
PRESENT_SCALE = 1.25
PRESENT_CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"]
  {display: none !important;}
[data-testid="stMainBlockContainer"] {max-width: 100%; padding-left: 2rem; padding-right: 2rem;}
[data-testid="stMainBlockContainer"] {font-size: 1.2rem;}
[data-testid="stMainBlockContainer"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMainBlockContainer"] [data-testid="stMarkdownContainer"] li,
[data-testid="stMainBlockContainer"] [data-testid="stWidgetLabel"] p,
[data-testid="stMainBlockContainer"] button p {font-size: 1.2rem;}
[data-testid="stMainBlockContainer"] [data-testid="stCaptionContainer"] p {font-size: 1.0rem;}
[data-testid="stMainBlockContainer"] h2 {font-size: 2.4rem;}
[data-testid="stMainBlockContainer"] h3 {font-size: 1.7rem;}
/* a projector of 1024 px or less: text a little less large, so a lesson's words, note and chart share the screen */
@media (max-width: 1024px) {[data-testid="stMainBlockContainer"] [data-testid="stMarkdownContainer"] p,
  [data-testid="stMainBlockContainer"] [data-testid="stMarkdownContainer"] li {font-size: 1.05rem;}}
.st-key-cfl-runbar-main {display: flex !important;}
.st-key-cfl-pickers-main {display: flex !important;}
[data-testid="stMetricValue"] {font-size: 2.3rem !important;}
[data-testid="stMetricLabel"] p {font-size: 1.0rem !important;}
</style>
"""
RUNBAR_SIDE, RUNBAR_MAIN = "cfl-runbar-side", "cfl-runbar-main"  # the run controls' two places (CSS above)
PICKERS_MAIN = "cfl-pickers-main"  # a page's copy of its sidebar's pickers (Partitions' presets), shown as RUNBAR_MAIN
PRESENT_KEY = "cfl.present"  # the switch (a widget: its state goes when a page without it is drawn)
PRESENT_ON = "cfl.present_on"  # whether presenter mode is on, kept across pages


NARROW_PX = 1024  # at most this wide (a 1024-px projector, an 800-px or zoomed browser) the sidebar starts collapsed
# Streamlit's own "auto" collapses the sidebar only up to 768 px (its md breakpoint), so this collapses it on a
# page's first load in a narrower window, and when a window is made narrower; the user can open it again.
SIDEBAR_JS = """
<script>
(function () {
  if (window.__cflSidebar) return;  // once per document: a rerun or a page change keeps the user's choice
  window.__cflSidebar = true;
  const narrow = () => window.innerWidth <= %d;
  const collapse = (tries) => {
    const bar = document.querySelector('[data-testid="stSidebar"]');
    if (bar && bar.getAttribute('data-collapsed') === 'true') return;
    const button = document.querySelector('[data-testid="stSidebarCollapseButton"] button');
    if (bar && button) { button.click(); return; }
    if (tries > 0) setTimeout(() => collapse(tries - 1), 200);  // the sidebar is not drawn yet
  };
  if (narrow()) collapse(50);
  let was = narrow();
  window.addEventListener('resize', () => { const now = narrow(); if (now && !was) collapse(10); was = now; });
})();
</script>
""" % NARROW_PX


def apply_theme() -> None:
    st.html(CSS)  # style only: Streamlit applies it without drawing an element (and needs no markdown plugin)
    with st.container(key="cfl-sidebar-js"):  # hidden: only its script matters
        st.html(SIDEBAR_JS, unsafe_allow_javascript=True)


def presenting() -> bool:
    """Whether presenter mode is on: the switch's state, kept across pages, or on a first visit ?present=1."""
    if PRESENT_ON not in st.session_state:
        st.session_state[PRESENT_ON] = st.query_params.get("present") == "1"
    return bool(st.session_state[PRESENT_ON])


def presenter_toggle() -> bool:
    """The "Presenter mode" switch beside every page's title (also ?present=1 in a link); True when on."""
    presenting()
    st.session_state[PRESENT_KEY] = st.session_state[PRESENT_ON]
    st.toggle("Presenter mode", key=PRESENT_KEY,
              on_change=lambda: st.session_state.__setitem__(PRESENT_ON, st.session_state[PRESENT_KEY]),
              help="For a projector: hides the sidebar and enlarges text, charts and headline numbers. "
                   "Switch it off here to get the sidebar back.")
    on = st.session_state[PRESENT_ON]
    if on:
        st.html(PRESENT_CSS)
    return on


def figure_scale() -> float:
    """How many times larger charts are drawn on this page: PRESENT_SCALE in presenter mode, else 1."""
    return PRESENT_SCALE if st.session_state.get(PRESENT_ON) else 1.0


def page_header(title: str, lead: str) -> None:
    """The page's title and lead, with the Presenter-mode switch beside the title.

    `lead` is HTML (no markdown: <b>, <code>), drawn with st.html: markdown holding HTML makes a fresh page's
    browser load and run Streamlit's raw-HTML markdown plugin, which st.html does not need."""
    # a row that wraps: the switch keeps its whole label, beside the title or under it in a narrow window
    with st.container(horizontal=True, vertical_alignment="bottom", horizontal_alignment="distribute"):
        st.markdown(f"## {title}", width="content")
        presenter_toggle()
    st.html(f"<div class='cfl-muted' style='margin-top:-0.6rem;margin-bottom:0.6rem'>{lead}</div>")
