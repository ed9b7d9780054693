"""Plotly figure builders. Pure functions of records (or partition facts): no Streamlit here.

Every builder returns a `plotly.graph_objects.Figure` in the house style (`house`): true clusters coloured from one
palette (cfl_ui.charts.palette), models told apart by symbol (scatter) or by a second palette (heatmap, stacked area).

Every figure of the dashboard (the live charts, the per-algorithm views of cfl_ui.views.algorithm_views, the client
drill-down, the IFCA explorer's (cfl_ui.charts.ifca_figures), the Partitions page's (cfl_ui.charts.partition_figures) and the Sweeps heatmap) is
written as plain dicts and wrapped
without plotly's validation (`figure_from`): building them through graph objects cost 30-400 ms each on this 2-core
machine (validators, `__setattr__` path parsing, the template validated per figure), about a core while five
browsers watched two jobs (benchmarks/SERVER_LOAD.md); from dicts it is a few ms, the same JSON. Their JSON is checked
against plotly's validation in the tests (tests/test_ui_algorithm_views_json.py, tests/test_ui_figures_json.py).
"""
from __future__ import annotations

import base64
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from .embedding import Embedding
from .palette import FONT, GRID, UNPLACED, cluster_color, model_color, model_symbol
# which rounds the charts draw of a long run; named here too, where the charts' callers look for them
from .rounds_drawn import (MAX_REPLAY_FRAMES, MAX_REPLAY_POINTS, MAX_ROUND_COLUMNS, decimate, decimated_note,
                           replay_cap, replay_indices, replay_note)

ARI_TARGET = 0.9
# texts drawn in a fixed colour are read on white and on the dark theme's near-black: mid tones only
MUTED = "#8a8a8a"
NOTE = "#b07d1a"


def _hex_alpha(color: str, alpha: float) -> str:
    color = color.lstrip("#")
    r, g, b = (int(color[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


_TEMPLATE: dict = {}


def house(height: int, legend: bool = True, **more) -> dict:
    """The house style as a layout dict: white (plotly_white, its template written out once per process), light
    grid, compact margins, a horizontal legend on top; `more` adds or replaces layout properties."""
    if not _TEMPLATE:
        import plotly.io as pio

        _TEMPLATE.update(pio.templates["plotly_white"].to_plotly_json())
    return {"template": _TEMPLATE, "height": height, "font": {"family": FONT, "size": 12},
            "margin": {"l": 10, "r": 10, "t": 28, "b": 10},
            "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.01, "xanchor": "left", "x": 0,
                       "font": {"size": 11}},
            "showlegend": legend, "hoverlabel": {"font": {"family": FONT}}, **more}


class FramedFigure(go.Figure):
    """A figure whose animation frames stay the plain dicts they were written as: `to_dict()` (what
    st.plotly_chart and cfl_ui.charts.draw send) holds them, `.frames` is empty (read `to_dict()["frames"]`).

    Unvalidated or not, plotly makes a graph object of every trace of every frame: a 2000-round replay took
    5.8 s to build and 1.9 s to copy and encode, against 1.2 s in all as dicts (benchmarks/SERVER_LOAD.md)."""

    _cfl_frames: list = []

    def to_dict(self):
        spec = super().to_dict()
        if self._cfl_frames:
            spec["frames"] = self._cfl_frames  # written once here and never changed: not copied
        return spec


def figure_from(data: list, layout_: dict, frames: list | None = None) -> go.Figure:
    """A figure from plain dicts, not validated again (the dicts are copied, so `house`'s template is shared
    safely): plotly.js draws exactly what is written here. With `frames`, a FramedFigure."""
    spec = {"data": data, "layout": layout_}
    if not frames:
        return go.Figure(spec, _validate=False)
    fig = FramedFigure(spec, _validate=False)
    fig._cfl_frames = frames
    return fig


def axis(title: str | None = None, **more) -> dict:
    """An axis' layout dict: `title` as plotly writes it ({"text": ...}), then any further properties."""
    return ({"title": {"text": title}} if title is not None else {}) | more


def colorscale(name: str) -> list:
    """A named colorscale as plotly.py writes it into the figure ([[position, colour], ...]): plotly.js has
    colorscales of the same names that differ (its RdBu is not plotly.py's)."""
    import plotly.colors as pc

    return pc.get_colorscale(name)


# plotly's add_vline / add_hline / add_vrect with annotation_position="top left", written out into a layout dict
def vline(lay: dict, x, line: dict, text: str | None = None) -> None:
    lay.setdefault("shapes", []).append(dict(type="line", x0=x, x1=x, xref="x", y0=0, y1=1, yref="y domain",
                                             line=line))
    if text is not None:
        lay.setdefault("annotations", []).append(dict(text=text, showarrow=False, x=x, xanchor="right", xref="x",
                                                      y=1, yanchor="top", yref="y domain"))


def hline(lay: dict, y, line: dict, text: str | None = None, *, below_right: bool = False,
          font: dict | None = None) -> None:
    """The label above the line at its left (plotly's "top left"), or under it at its right (`below_right`)."""
    lay.setdefault("shapes", []).append(dict(type="line", x0=0, x1=1, xref="x domain", y0=y, y1=y, yref="y",
                                             line=line))
    if text is not None:
        note = dict(text=text, showarrow=False, x=1 if below_right else 0, xanchor="right" if below_right else "left",
                    xref="x domain", y=y, yanchor="top" if below_right else "bottom", yref="y")
        if font is not None:
            note["font"] = font
        lay.setdefault("annotations", []).append(note)


def vrect(lay: dict, x0, x1, text: str | None = None, **shape) -> None:
    lay.setdefault("shapes", []).append(dict(type="rect", x0=x0, x1=x1, xref="x", y0=0, y1=1, yref="y domain",
                                             **shape))
    if text is not None:
        lay.setdefault("annotations", []).append(dict(text=text, showarrow=False, x=x0, xanchor="left", xref="x",
                                                      y=1, yanchor="top", yref="y domain"))


def empty_figure(message: str, height: int = 240) -> go.Figure:
    note = dict(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                font=dict(size=13, color=MUTED))
    return figure_from([], house(height, legend=False, annotations=[note], xaxis={"visible": False},
                                 yaxis={"visible": False}))


# -- the loss-vector embedding ----------------------------------------------------
def _hover(frame, i, value_label="losses") -> str:
    losses = frame.losses[i]
    shown = ", ".join(f"{v:.3f}" for v in losses[:8]) + (", …" if len(losses) > 8 else "")
    model = int(frame.models[i])
    return (f"<b>client {int(frame.clients[i])}</b> · true cluster {int(frame.clusters[i])}<br>"
            f"assigned model {model if model >= 0 else '—'}<br>{value_label}: [{shown}]")


ATTACKER_LINE = "#111111"  # an attacker's point: its cluster's colour inside a thick dark ring
ATTACKER_NAME = "attacker (malicious)"


def attackers_of(records) -> frozenset:
    """The run's malicious clients (cfl_core/conditions: the same every round), from its records' extras."""
    return frozenset(int(c) for c in ((records[-1].extras or {}).get("malicious") or ())) if records else frozenset()


def _cluster_traces(frame, clusters, dims, value_label="losses", attackers=frozenset()):
    traces = []
    for c in clusters:
        mask = frame.clusters == c
        pts = frame.points[mask]
        idx = np.flatnonzero(mask)
        text = [_hover(frame, i, value_label) for i in idx]
        symbols = [model_symbol(m, dims) for m in frame.models[mask]]
        common = dict(mode="markers", name=f"cluster {c}", legendgroup=f"cluster{c}", text=text,
                      customdata=frame.clients[mask].astype(int).tolist(),  # the client id, for a click
                      hovertemplate="%{text}<extra></extra>", showlegend=False)
        if dims == 3:
            traces.append(dict(type="scatter3d", x=pts[:, 0], y=pts[:, 1], z=pts[:, 2], marker=dict(
                color=cluster_color(c), symbol=symbols, size=5, line=dict(width=0.5, color="white")), **common))
        else:
            bad = [int(k) in attackers for k in frame.clients[mask]]
            ring = (dict(width=[3 if b else 1 for b in bad], color=[ATTACKER_LINE if b else "white" for b in bad])
                    if any(bad) else dict(width=1, color="white"))
            traces.append(dict(type="scatter", x=pts[:, 0], y=pts[:, 1], marker=dict(
                color=cluster_color(c), symbol=symbols, size=12, line=ring, opacity=0.92), **common))
    return traces


def typed_array(values) -> dict:
    """A float array as plotly.js' typed-array JSON (its dtype and base64 bytes), as plotly's graph objects write
    numpy arrays: frames kept as dicts (FramedFigure) are encoded by plain JSON, which would write lists."""
    a = np.asarray(values)
    if a.dtype != np.float32:
        a = a.astype(np.float64)
    kind = "f4" if a.dtype == np.float32 else "f8"
    return {"dtype": kind, "bdata": base64.b64encode(np.ascontiguousarray(a, dtype="<" + kind).tobytes()).decode()}


def _typed_xyz(trace: dict) -> dict:
    for axis in ("x", "y", "z"):
        if isinstance(trace.get(axis), np.ndarray) and trace[axis].size:
            trace[axis] = typed_array(trace[axis])
    return trace


def _note(frame, dims):
    text = f"round {frame.round}" + (f" · {frame.note}" if frame.note else "")
    return [dict(text=text, showarrow=False, x=0, y=1.0, xref="paper", yref="paper", xanchor="left",
                 yanchor="bottom", font=dict(size=11, color=NOTE if frame.note else MUTED))]


REPLAY_GAP = 62  # px from the plot's bottom edge to the replay buttons: below the tick labels and the axis title
REPLAY_MARGIN = 160  # px under the plot for the buttons and the slider


def _legend_marker(dims: int, **marker) -> dict:
    """A legend-only trace (no points: the data traces mix symbols and colours)."""
    trace = dict(type="scatter3d" if dims == 3 else "scatter", mode="markers", x=[None], y=[None],
                 marker=marker, hoverinfo="skip")
    if dims == 3:
        trace["z"] = [None]
    return trace


def embedding_figure(emb: Embedding, active_round: int | None = None, height: int = 470,
                     animate: bool = True, attackers=frozenset()) -> go.Figure:
    """Clients as points (colour = true cluster, symbol = assigned model), one animation frame per round (a long
    run's replay keeps some of them: `replay_indices`); malicious clients (`attackers`) in a thick dark ring."""
    dims = 3 if emb.dims == 3 else 2
    clusters = sorted({int(c) for f in emb.frames for c in f.clusters})
    models = sorted({int(m) for f in emb.frames for m in f.models if m >= 0} | set(range(emb.num_models)))
    idx = emb.frame_index(active_round)
    label = "losses" if emb.what == "loss vectors" else emb.what
    data = _cluster_traces(emb.frames[idx], clusters, dims, label, attackers)
    n_cluster_traces = len(clusters)
    for c in clusters:  # the colour legend (static traces: the data traces mix symbols)
        trace = _legend_marker(dims, symbol="circle", color=cluster_color(c), size=10 if dims != 3 else 5)
        trace.update(name=f"cluster {c}", legendgroup=f"cluster{c}")
        if c == clusters[0]:
            trace["legendgrouptitle"] = {"text": "true cluster"}
        data.append(trace)
    for m in models[:16]:  # the symbol legend (static traces, never animated)
        trace = _legend_marker(dims, symbol=model_symbol(m, dims), color="rgba(90,90,90,0.85)",
                               size=9 if dims != 3 else 5)
        trace.update(name=f"model {m}", legendgroup="models")
        if m == models[0]:
            trace["legendgrouptitle"] = {"text": "assigned model"}
        data.append(trace)
    if dims == 2 and any(int(c) in attackers for f in emb.frames for c in f.clients):
        data.append(_legend_marker(dims, symbol="circle", color="rgba(255,255,255,0)", size=11,
                                   line=dict(width=3, color=ATTACKER_LINE)))
        data[-1].update(name=ATTACKER_NAME, legendgroup="attackers")
    if emb.method == "raw" and dims == 2 and emb.num_models == 2:
        lo, hi = emb.ranges[0]
        data.append(dict(type="scatter", x=[lo, hi], y=[lo, hi], mode="lines", name="equal losses",
                         line=dict(color="#bbb", dash="dot", width=1), hoverinfo="skip"))
    replay = animate and len(emb.frames) > 1
    bottom = REPLAY_MARGIN if replay else 10
    lay = house(height)
    if dims == 3:
        lay["scene"] = dict(aspectmode="cube", **{
            f"{a}axis": axis(emb.axis_titles[i], range=list(emb.ranges[i]), backgroundcolor="white", gridcolor=GRID)
            for i, a in enumerate("xyz")})
        lay["uirevision"] = "embedding"
    else:
        lay["xaxis"] = axis(emb.axis_titles[0], range=list(emb.ranges[0]), zeroline=False, gridcolor=GRID)
        lay["yaxis"] = axis(emb.axis_titles[1], range=list(emb.ranges[1]), zeroline=False, gridcolor=GRID)
    # compact: both groups (4 clusters, 4 models and their titles) fit beside a 240-px plot without scrolling
    lay["legend"].update(orientation="v", yanchor="top", y=1, x=1.02, xanchor="left", tracegroupgap=6,
                         grouptitlefont=dict(size=11))
    lay.update(margin=dict(l=10, r=10, t=30, b=bottom), annotations=_note(emb.frames[idx], dims))
    frames = None
    # the play buttons and the slider under the x axis' title, placed in pixels (paper units scale with the plot)
    below = -REPLAY_GAP / max(1, height - 30 - bottom)
    if replay:
        # redraw every frame: without it plotly keeps the first frame's layout, so the "round N" note above the
        # points would contradict the slider while ▶ plays
        redraw = True
        kept = replay_indices(emb, idx)
        shown = [emb.frames[i] for i in kept]
        frames = [dict(data=[_typed_xyz(t) for t in _cluster_traces(f, clusters, dims, label, attackers)],
                       traces=list(range(n_cluster_traces)), name=str(f.round), layout=dict(annotations=_note(f, dims)))
                  for f in shown]
        step_args = lambda name: [[name], dict(mode="immediate", frame=dict(duration=0, redraw=redraw),
                                              transition=dict(duration=0))]
        # the play/pause buttons on a row of their own, the slider under them across the whole width
        lay.update(
            updatemenus=[dict(
                type="buttons", direction="left", x=0, y=below, xanchor="left", yanchor="top", showactive=False,
                pad=dict(t=0, r=6), buttons=[
                    dict(label="▶ play", method="animate",
                         args=[None, dict(frame=dict(duration=650, redraw=redraw), fromcurrent=False,
                                          transition=dict(duration=300, easing="cubic-in-out"))]),
                    dict(label="❚❚ pause", method="animate",
                         args=[[None], dict(mode="immediate", frame=dict(duration=0, redraw=False),
                                            transition=dict(duration=0))]),
                ])],
            sliders=[dict(
                active=kept.index(idx), x=0, len=1.0, y=below, yanchor="top", pad=dict(t=34, b=0),
                currentvalue=dict(prefix="round ", xanchor="right", font=dict(size=12)),
                steps=[dict(label=str(f.round), method="animate", args=step_args(str(f.round))) for f in shown],
            )],
        )
    return figure_from(data, lay, frames)


# -- assignments ------------------------------------------------------------------
def _discrete_scale(colors: list[str]) -> list:
    n = len(colors)
    scale = []
    for i, c in enumerate(colors):
        scale += [[i / n, c], [(i + 1) / n, c]]
    return scale


def _truth(record) -> np.ndarray:
    n = len(record.assignments)
    if record.true_clusters and len(record.true_clusters) == n:
        return np.asarray(record.true_clusters, dtype=int)
    return np.zeros(n, dtype=int)


STRIP_WIDTH, STRIP_GAP = 0.04, 0.006  # the true-cluster strip's share of the width, the gap beside it


def assignment_heatmap(records, height: int | None = None, order_by=None, attackers=frozenset()) -> go.Figure:
    """Clients (rows, grouped by true cluster) x rounds, each cell coloured by the model the client used
    (at most MAX_ROUND_COLUMNS rounds: see `decimate`).

    Rows are grouped by the last round's true clusters, or by those of the record `order_by` (a lesson keeps its
    first step's order); where the truth has changed since, the strip shows both: then and now."""
    records = decimate(records)
    if not records:
        return empty_figure("no rounds yet")
    now = _truth(records[-1])
    truth = now if order_by is None or len(_truth(order_by)) != len(now) else _truth(order_by)
    both = not np.array_equal(truth, now)
    n = len(truth)
    order = np.lexsort((np.arange(n), truth))
    z_int = np.array([r.assignments for r in records], dtype=int).T[order]
    k = max(int(z_int.max()) + 1, 1)
    z = z_int.astype(float)
    z[z_int < 0] = np.nan
    rounds = [r.round for r in records]
    clients = order
    clusters = sorted(set(truth.tolist()))
    rows_y = list(range(n))
    ticks = list(range(k)) if k <= 12 else list(range(0, k, max(1, k // 8)))
    strip_z = np.column_stack([truth, now])[order] if both else truth[order][:, None]
    top = int(max(truth.max(), now.max()))
    data = [
        dict(type="heatmap", z=strip_z, x=[f"r{order_by.round}", "now"] if both else ["true"], y=rows_y,
             showscale=False, zmin=-0.5, zmax=top + 0.5,
             colorscale=_discrete_scale([cluster_color(c) for c in range(top + 1)]),
             customdata=np.repeat(clients[:, None], strip_z.shape[1], axis=1),
             hovertemplate="client %{customdata} · true cluster %{z} (%{x})<extra></extra>",
             xgap=0, ygap=0, xaxis="x", yaxis="y"),
        dict(type="heatmap", z=z, x=rounds, y=rows_y, zmin=-0.5, zmax=k - 0.5,
             colorscale=_discrete_scale([model_color(m) for m in range(k)]),
             customdata=np.repeat(clients[:, None], len(rounds), axis=1),
             hovertemplate="client %{customdata}<br>round %{x}: model %{z}<extra></extra>",
             colorbar=dict(title=dict(text="model", side="top"), tickvals=ticks, ticktext=[str(t) for t in ticks],
                           thickness=12, len=0.9), xgap=0, ygap=1 if n <= 60 else 0, xaxis="x2", yaxis="y2"),
    ]
    # cluster blocks: labels in the middle, separators between them
    sorted_truth = truth[order]
    tickvals, ticktext, shapes = [], [], []
    for c in clusters:
        rows = np.flatnonzero(sorted_truth == c)
        tickvals.append(float(rows.mean()))
        ticktext.append(f"cluster {c}")
        if rows[0] > 0:
            y = float(rows[0] - 0.5)
            shapes.append(dict(type="line", line=dict(color="white", width=3), x0=0, x1=1, xref="x2 domain",
                               y0=y, y1=y, yref="y2"))
    bad_rows = [i for i, c in enumerate(clients) if int(c) in attackers]
    if bad_rows:  # an x on the true-cluster strip of each malicious client's row
        data.append(dict(type="scatter", x=[(f"r{order_by.round}" if both else "true")] * len(bad_rows),
                         y=bad_rows, mode="markers", name=ATTACKER_NAME, showlegend=True, xaxis="x", yaxis="y",
                         marker=dict(symbol="x-thin", size=9, line=dict(width=2.5, color=ATTACKER_LINE)),
                         customdata=[int(clients[i]) for i in bad_rows],
                         hovertemplate="client %{customdata}: attacker (malicious)<extra></extra>"))
    if height is None:
        height = int(min(620, max(260, 9 * n + 110)))
    # two columns side by side sharing the y axis (make_subplots' domains); the strip twice as wide for then/now
    strip = (1 - STRIP_GAP) * STRIP_WIDTH * (2.5 if both else 1)
    lay = house(height, legend=False, plot_bgcolor=UNPLACED, shapes=shapes,
                xaxis=dict(anchor="y", domain=[0.0, strip], showticklabels=both, showgrid=False, side="top",
                           tickfont=dict(size=10)),
                yaxis=dict(anchor="x", domain=[0.0, 1.0], tickvals=tickvals, ticktext=ticktext, autorange="reversed",
                           showgrid=False),
                xaxis2=axis("round", anchor="y2", domain=[strip + STRIP_GAP, 1.0], showgrid=False),
                yaxis2=dict(anchor="x2", domain=[0.0, 1.0], matches="y", showticklabels=False, showgrid=False))
    if bad_rows:
        lay.update(showlegend=True, legend=dict(orientation="h", x=0, y=-0.02, yanchor="top", font=dict(size=11)))
    return figure_from(data, lay)


def clients_per_model(records, height: int = 300) -> go.Figure:
    """How many clients each model serves, round by round (stacked): a collapse shows as one band (at most
    MAX_ROUND_COLUMNS rounds: see `decimate`)."""
    records = decimate(records)
    if not records:
        return empty_figure("no rounds yet")
    assign = np.array([r.assignments for r in records], dtype=int)
    k = max(int(assign.max()) + 1, 1)
    rounds = [r.round for r in records]
    data = []
    for m in range(k):
        counts = (assign == m).sum(1)
        if not counts.any():
            continue
        color = model_color(m)
        data.append(dict(type="scatter", x=rounds, y=counts, name=f"model {m}", stackgroup="clients", mode="lines",
                         line=dict(width=0.6, color=color), fillcolor=_hex_alpha(color, 0.75),
                         hovertemplate=f"model {m}: " + "%{y} clients in round %{x}<extra></extra>"))
    lay = house(height, legend=k <= 12, xaxis=axis("round", gridcolor=GRID),
                yaxis=axis("clients", gridcolor=GRID, rangemode="tozero"))
    lay["legend"]["traceorder"] = "normal"
    return figure_from(data, lay)


# -- curves ---------------------------------------------------------------------
@dataclass
class Series:
    label: str
    records: tuple
    color: str
    dash: str | None = None


def _values(records, metric: str):
    xs, ys = [], []
    total = 0.0
    for r in records:
        if metric == "mb":
            total += (r.bytes_down + r.bytes_up) / 1e6
            v = total
        elif metric == "seconds":
            total += r.seconds or 0.0
            v = total
        else:
            v = getattr(r, metric, None)
            if v is None:
                v = (r.extras or {}).get(metric)
        xs.append(r.round)
        ys.append(v)
    return xs, ys


def has_metric(series_list, metric: str) -> bool:
    return any(any(v is not None for v in _values(s.records, metric)[1]) for s in series_list)


METRIC_TITLES = {"accuracy": "test accuracy (mean over clients)", "weighted_accuracy": "test accuracy (weighted)",
                 "ari": "ARI vs true clusters", "nmi": "NMI vs true clusters", "loss": "test loss",
                 "train_loss": "training loss", "mb": "MB sent (cumulative)", "seconds": "seconds (cumulative)",
                 "models_in_use": "models in use"}


def same_curve(xs, ys, xs0, ys0, tol: float = 1e-9) -> bool:
    """Whether two curves coincide (same rounds, values equal within tol): one would hide the other."""
    if list(xs) != list(xs0) or len(ys) != len(ys0):
        return False
    return all((a is None and b is None) or (a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b)))
               for a, b in zip(ys, ys0))


def metric_figure(series_list, metrics: list[str], height: int = 300, y_title: str | None = None,
                  target: float | None = None, log_y: bool = False) -> go.Figure:
    """Curves over rounds: one colour per series (algorithm), one dash style per metric."""
    dashes = [None, "dot", "dash", "dashdot"]
    data = []
    drawn: dict = {}  # metric -> [(label, xs, ys)] already drawn: a curve equal to one of them is drawn dashed
    for s in series_list:
        for j, metric in enumerate(metrics):
            xs, ys = _values(s.records, metric)
            if not any(v is not None for v in ys):
                continue
            name = s.label if len(metrics) == 1 else f"{s.label} · {metric.upper() if len(metric) <= 3 else metric}"
            same = next((label for label, xs0, ys0 in drawn.get(metric, []) if same_curve(xs, ys, xs0, ys0)), None)
            drawn.setdefault(metric, []).append((s.label, xs, ys))
            dash = s.dash or dashes[j % len(dashes)]
            if same is not None:  # it would hide under the earlier curve: dashed, wider, hollow markers, named
                name += f" (= {same})"
                dash = "dash" if dash in (None, "solid") else "longdashdot"
            line = dict(color=s.color, width=(2.2 if j == 0 else 1.6) + (1.4 if same else 0))
            if dash is not None:
                line["dash"] = dash
            data.append(dict(
                type="scatter", x=xs, y=ys, mode="lines+markers" if len(xs) < 40 else "lines", name=name, line=line,
                marker=dict(size=9 if same else 5, symbol="circle-open" if same else "circle"), legendgroup=s.label,
                hovertemplate=f"{name}<br>round " + "%{x}: %{y:.4g}<extra></extra>"))
    lay = house(height, xaxis=axis("round", gridcolor=GRID),
                yaxis=axis(y_title or METRIC_TITLES.get(metrics[0], metrics[0]), gridcolor=GRID))
    if log_y:
        lay["yaxis"]["type"] = "log"
    if target is not None:  # a line across the plot, its value under it at the right
        hline(lay, target, dict(color="#999", dash="dash", width=1), f"{target:g}", below_right=True,
              font=dict(size=10, color="#888"))
    if metrics[0] in ("accuracy", "weighted_accuracy", "ari", "nmi") and not log_y:
        lo = min([0.0] + [v for s in series_list for m in metrics for v in _values(s.records, m)[1]
                          if v is not None])
        lay["yaxis"]["range"] = [min(lo, 0) - 0.03, 1.03]
    return figure_from(data, lay)
