"""The one way a chart reaches a page: figures cached per run and round, drawn with the toolbar config, a title
above and a caption below.

    chart(lambda: F.metric_figure(series, ["ari"]), "cmp.ari", cache=("ari", unit_key(u)),
          title="**Clusters found (ARI) over rounds**", caption="How well ...")

A refresh of a live page (about once a second) reuses the figures whose data did
not change instead of rebuilding them: `cache` names what a figure is built from
(`unit_key` for a run's records so far). A cached figure is also serialized once:
st.plotly_chart would copy it (`Figure.to_dict`, a deepcopy) and encode it to JSON
(plotly's encoder encodes twice) on every redraw of every session, which was most
of the server's time while five browsers watched running jobs
(benchmarks/SERVER_LOAD.md); `Prepared` hands it the dict and JSON made the first time.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict

import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

from .scale import scaled_spec
from .theme import figure_scale

# every chart's toolbar (plotly's modebar, shown while the pointer is over the chart): the camera (PNG), zoom and
# reset stay; pan, box/lasso select, zoom +/-, autoscale, spikes, hover modes and the logo go. The full bar is
# 224 px wide and wraps onto a second row in an 800-px window, over the legend and the "round N" note.
TOOLBAR = {"displaylogo": False, "displayModeBar": "hover", "modeBarButtonsToRemove": [
    "pan2d", "select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d", "toggleSpikelines",
    "hoverClosestCartesian", "hoverCompareCartesian", "hoverClosestGl2d", "hoverClosest3d", "hoverClosestPie",
    "tableRotation", "resetCameraLastSave3d", "pan3d", "zoom3d"]}
# the height of the band at the top of every chart kept free for the toolbar: legends and notes sit below it
TOOLBAR_BAND = 30
CACHE_SIZE = 256
# and at most about this many bytes of them: an export file of a long run is tens of MB, a long replay's figure
# a few MB, and 256 such would be gigabytes of the server's memory (the newest entry is kept whatever its size)
CACHE_BYTES = 256 * 2**20

_LOCK = threading.Lock()
_CACHE: "OrderedDict[tuple, tuple[object, int]]" = OrderedDict()  # key -> (value, its weight())
_BUILDING: "dict[tuple, threading.Event]" = {}  # keys being built now, and the event their waiters wait on
_BUILT = threading.local()  # .seconds: CPU this thread spent building cached values; .depth: builds under way


def built_seconds() -> float:
    """CPU seconds this thread has spent building values for `cached` (work shared by every session): what a
    live view's poll cost, less this, is the session's own cost (cfl_ui.jobs.poll_pace)."""
    return getattr(_BUILT, "seconds", 0.0)


def cached(key: tuple, build):
    """`build()` once per key (the most recent CACHE_SIZE kept), shared by every session of the server.

    One build per key at a time: a session that asks while another builds the key waits for that build
    instead of making its own. When a job ends, every session watching it reruns at once and asks for the
    same new figures; built side by side, five sessions' builds of a long run's replay held the interpreter
    lock for 15-20 s, and a newcomer's page waited that long (benchmarks/SERVER_LOAD.md). If the build
    fails, a waiter builds it itself (and meets the same error)."""
    while True:
        with _LOCK:
            entry = _CACHE.get(key)
            if entry is not None:
                _CACHE.move_to_end(key)
                return entry[0]
            running = _BUILDING.get(key)
            if running is None:
                running = _BUILDING[key] = threading.Event()
                break
        running.wait()  # then look again: the value, or (the build failed) the key is free to build
    depth = getattr(_BUILT, "depth", 0)
    _BUILT.depth, began = depth + 1, time.thread_time()
    try:
        value = build()
        size = weight(value)
        with _LOCK:
            _CACHE[key] = (value, size)
            held = sum(w for _, w in _CACHE.values())
            while len(_CACHE) > 1 and (len(_CACHE) > CACHE_SIZE or held > CACHE_BYTES):
                held -= _CACHE.popitem(last=False)[1][1]
    finally:
        _BUILT.depth = depth
        if depth == 0:  # a build inside a build is counted once, by the outer one
            _BUILT.seconds = built_seconds() + time.thread_time() - began
        with _LOCK:
            _BUILDING.pop(key, None)
        running.set()
    return value


def weight(value) -> int:
    """About how many bytes a cached value holds: texts by their length, a Prepared figure by four times its JSON
    (the JSON, the dict it was made from and the figure object beside it), tuples and lists by their parts;
    anything else counts 0 (small: an algorithm's views, HTML of four sample images)."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, Prepared):
        return 4 * len(value._spec.json_text)
    if isinstance(value, (tuple, list)):
        return sum(weight(v) for v in value)
    return 0


class _Spec(dict):
    """A figure's dict together with its JSON text (what st.plotly_chart sends for it)."""

    json_text: str = ""


class Prepared(go.Figure):
    """A built figure, serialized once, that st.plotly_chart draws without copying or encoding it again.

    st.plotly_chart calls `to_dict()` on a figure, then `plotly.io.to_json` on that dict: here the
    first returns the dict made once and the second (through `_to_json`) its JSON made once, the
    very text plotly makes for it. Only `to_dict` is meant to be used: keep the built figure for anything else."""

    def __init__(self, figure: go.Figure):  # no go.Figure.__init__: nothing is validated or copied again
        spec = _Spec(figure.to_dict())
        spec.json_text = _PLOTLY_TO_JSON(spec, validate=False)
        self._spec = spec

    def to_dict(self):
        return self._spec


_PLOTLY_TO_JSON = pio.to_json


def _to_json(fig, *args, **kwargs):
    if isinstance(fig, _Spec) and not args and kwargs == {"validate": False}:
        return fig.json_text
    return _PLOTLY_TO_JSON(fig, *args, **kwargs)


if getattr(pio.to_json, "__name__", "") != "_to_json":  # once per process, whatever reloads this module
    pio.to_json = _to_json


def run_identity(unit) -> str:
    """The run a unit shows: its reference and when it started (a folder run again with `--overwrite` is another
    run under the same reference). What the caches of a run's figures and embeddings are keyed by."""
    started = (getattr(unit, "meta", None) or {}).get("started_at")
    return f"{unit.ref}@{started}" if started else str(unit.ref)


def unit_key(unit) -> tuple:
    """What a run's figures are built from: the run (`run_identity`) and how many rounds it has so far."""
    recs = unit.records
    return (run_identity(unit), unit.folder, len(recs), recs[-1].round if recs else -1)


LEGEND_ROW = 20  # px: one more row of a legend above the plot
# px of legend width in the narrowest chart: a half column at 800 px (side by side) is 330 px wide, of which the
# y axis' title and ticks take up to 90 (cfl_ui.charts.theme stacks columns below 280 px)
NARROWEST = 230


def legend_rows(figure, scale: float = 1.0) -> int:
    """How many rows a horizontal legend above the plot may take in the narrowest column (1 for any other).

    A legend that wraps grows upwards from the plot's top edge, into the band: room is kept for its rows. Plotly
    stacks the entries of one legend group under each other (a run's ARI and NMI curves), so a group is a block
    as tall as its entries and as wide as its widest; the blocks are laid out side by side and wrap. `scale`: the
    figure's fonts and symbols are that many times larger (presenter mode, cfl_ui.charts.scale)."""
    legend = figure.layout.legend
    if figure.layout.showlegend is False or legend.orientation != "h" or (legend.y is not None and legend.y < 1):
        return 1
    fixed = legend.entrywidth if legend.entrywidthmode in (None, "pixels") and legend.entrywidth else None
    groups: dict = {}  # group -> entry widths, in the legend's order (a trace without a group is its own)
    for i, t in enumerate(figure.data):
        if t.showlegend is not False and t.name:  # the symbol and gaps, then the text (~6.5 px a character)
            text = 5 * scale + fixed if fixed else 6.5 * scale * len(t.name)
            groups.setdefault(t.legendgroup or ("", i), []).append(40 * scale + text)
    blocks = [(max(widths), len(widths)) for widths in groups.values()]
    if not blocks:
        return 1
    if sum(w for w, _ in blocks) <= NARROWEST:
        return max(h for _, h in blocks)
    # too wide for one line: plotly wraps the blocks into a grid whose columns are all as wide as the widest
    per_line = max(1, int(NARROWEST // max(w for w, _ in blocks)))
    return sum(max(h for _, h in blocks[i:i + per_line]) for i in range(0, len(blocks), per_line))


def with_toolbar_band(figure):
    """The figure with TOOLBAR_BAND pixels added to its top margin, once (a figure drawn again keeps its margin).

    Plotly draws its toolbar over the top right corner of the figure, where horizontal legends, a replay's
    "round N" note, colour-bar titles and sample-image captions sit just above the plot: the band moves them
    below the toolbar. The figure grows by the band, so the plot area keeps its pixels (and whatever sits
    beside or below it, placed relative to it, keeps its place). Only figures with a margin of their own (the house
    style, cfl_ui.charts.figures.house) are changed:
    plotly's default top margin (80 px) already leaves the room."""
    if not isinstance(figure, go.Figure) or getattr(figure, "_toolbar_band", False):
        return figure
    top = figure.layout.margin.t
    if top is not None:
        scale = getattr(figure, "_cfl_scale", 1.0)  # the toolbar keeps its size; a legend's rows grow with the figure
        band = TOOLBAR_BAND + round(LEGEND_ROW * scale) * (legend_rows(figure, scale) - 1)
        figure.layout.margin.t = top + band
        if figure.layout.height is not None:  # the plot keeps its size: what is placed around it keeps its place
            figure.layout.height += band
    figure._toolbar_band = True
    return figure


def sized(figure, scale: float):
    """The figure drawn `scale` times larger (presenter mode: cfl_ui.charts.scale), as a new figure; the figure
    itself at scale 1 or when it is not a plotly figure."""
    if scale == 1 or not isinstance(figure, go.Figure):
        return figure
    from .figures import figure_from

    spec = scaled_spec(figure.to_dict(), scale)
    big = figure_from(spec["data"], spec["layout"], spec.get("frames"))
    big._cfl_scale = scale
    return big


def _with_spec(figure, scale: float = 1.0):
    """(the figure, what st.plotly_chart draws of it: its Prepared form when it is a plotly figure)."""
    figure = with_toolbar_band(sized(figure, scale))
    return figure, Prepared(figure) if isinstance(figure, go.Figure) else figure


def _prepared_on(figure, scale: float = 1.0):
    """_with_spec(figure, scale), made once per scale and kept on the figure itself (two sessions racing both make
    the same)."""
    pairs = getattr(figure, "_cfl_with_spec", None)
    if pairs is None:
        pairs = figure._cfl_with_spec = {}
    if scale not in pairs:
        pairs[scale] = _with_spec(figure, scale)
    return pairs[scale]


def chart(figure, key: str, *, cache: tuple | None = None, title: str | None = None,
          caption: str | None = None, select: bool = False, shared: bool = False):
    """Draw one plotly chart and return its figure.

    figure: a figure, or a function that builds it (built once per `cache` key when one is given).
    title: markdown above the chart; caption: the one-line explanation below it.
    select: clicking a point reruns the script with the selection in st.session_state[key].
    shared: `figure` is itself cached and never changed after it is drawn (an algorithm's view, built once per
    round count for every session): it is serialized once, the first time, instead of at every redraw of every
    session."""
    if title:
        st.markdown(title)
    scale = figure_scale()  # presenter mode: larger figures, not a zoomed page (their parts stay in their box)
    if cache is not None:
        sized_cache = cache if scale == 1 else (*cache, ("scale", scale))
        figure, drawn = cached(sized_cache, lambda: _with_spec(figure() if callable(figure) else figure, scale))
    elif shared and isinstance(figure, go.Figure):
        figure, drawn = _prepared_on(figure, scale)
    else:
        figure = drawn = with_toolbar_band(sized(figure() if callable(figure) else figure, scale))
    picking = dict(on_select="rerun", selection_mode="points") if select else {}
    st.plotly_chart(drawn, key=key, width="stretch", config=TOOLBAR, **picking)
    if caption:
        st.caption(caption)
    return figure
