"""Why did this client move? One client's story in a run: its loss on every model over the rounds, the model it
took each round with the assignment rule's reason in words, and its own accuracy.

The reasons are read from the records only: IFCA's lowest loss (the loss matrix row), CLoVE's nearest centre
(a KMeans centre is the mean of its members' vectors, so the centres are the mean loss vectors of each model's
clients that round), CFL's split checks (the recorded cosine similarities of the clients' updates).

An algorithm's reason is registered like its views (cfl_ui.views.algorithm_views):

    @reason("cfl")
    def cfl_reason(unit, rec, client, model) -> str: ...

An algorithm without one gets a plain "on model m" line.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from ..charts.draw import chart, unit_key
from ..charts.figures import axis, figure_from, house
from ..charts.palette import GRID, model_color

PICK = "drill.client"

ReasonFn = Callable[..., str]  # (unit, record, client, model) -> the rule's reason in words
REASONS: dict[str, ReasonFn] = {}


def reason(*algorithms: str) -> Callable[[ReasonFn], ReasonFn]:
    """Register `fn(unit, rec, client, model)` as the reason the drill-down gives for these algorithms' choices."""
    def add(fn: ReasonFn) -> ReasonFn:
        for algorithm in algorithms:
            REASONS[algorithm] = fn
        return fn
    return add


def _row(rec, client):
    """The client's loss vector in this round's record (None when it was not measured)."""
    if rec.loss_matrix is None or client not in rec.participants:
        return None
    return np.asarray(rec.loss_matrix[rec.participants.index(client)], dtype=float)


@reason("ifca")
def ifca_reason(unit, rec, client, model):
    row = _row(rec, client)
    if row is None:
        return f"kept model {model} (no losses measured this round)"
    order = np.argsort(row, kind="stable")
    best = int(order[0])
    if len(row) > 1 and abs(row[order[0]] - row[order[1]]) <= 1e-9 * max(1.0, abs(row[order[0]])):
        return f"losses tied ({row[order[0]]:.3g} on every model it tied on): the tie goes to model {best}"
    second = f" vs {row[order[1]]:.3g} on model {int(order[1])}" if len(row) > 1 else ""
    return f"lowest loss was model {best} ({row[best]:.3g}{second})"


@reason("clove")
def clove_reason(unit, rec, client, model):
    sqrt_losses = bool((unit.config.get("options") or {}).get("sqrt_losses"))
    row = _row(rec, client)
    if row is None:
        return (f"kept model {model}: " + ("its round-0 model was drawn at random" if rec.round == 0 and
                                           rec.phase == "init" else "the assignment is frozen (nothing measured)"))
    mat = np.asarray(rec.loss_matrix, dtype=float)
    emb = np.sqrt(np.clip(mat, 0, None)) if sqrt_losses else mat
    given = np.asarray([rec.assignments[c] for c in rec.participants])
    centres = {int(m): emb[given == m].mean(axis=0) for m in sorted(set(given.tolist()))}
    mine = emb[rec.participants.index(client)]
    dist = sorted((float(np.linalg.norm(mine - c)), m) for m, c in centres.items())
    near = dist[0]
    other = f" vs {dist[1][0]:.3g} to model {dist[1][1]}'s" if len(dist) > 1 else ""
    return (f"nearest centre was the group matched to model {near[1]} (distance {near[0]:.3g}{other}), "
            f"so it took model {model}")


@reason("cfl")
def cfl_reason(unit, rec, client, model):
    events = [e for e in (rec.extras or {}).get("split_events", []) if any(client in p for p in e["children"])]
    sim = (rec.extras or {}).get("similarity")
    if not events:
        return f"stayed with model {model}: no split of its cluster was tried this round"
    e = events[0]
    own, other = (e["children"][0], e["children"][1]) if client in e["children"][0] else \
        (e["children"][1], e["children"][0])
    text = "split accepted" if e["accepted"] else "split refused"
    if sim is not None and client in rec.participants:
        idx = rec.participants.index(client)
        cross = [sim[idx][rec.participants.index(o)] for o in other if o in rec.participants]
        if cross:
            text += f": its update's largest cosine similarity to the other side was {max(cross):.3f}"
    return f"{text} (α = {e['alpha_cross_max']:.3f}); now on model {model}"


@reason("fedavg")
def fedavg_reason(unit, rec, client, model):
    return "one global model for everyone"


@reason("oracle")
def oracle_reason(unit, rec, client, model):
    return f"told its true cluster ({rec.true_clusters[client] if rec.true_clusters else '?'})"


def unexplained(unit, rec, client, model):
    return f"on model {model} (this algorithm records no per-client reason)"


def reasons(unit, client: int) -> list[dict]:
    """One row per round: the model the client took, the rule's reason in words, its own accuracy."""
    explain = REASONS.get(unit.algorithm, unexplained)
    rows, prev = [], None
    for rec in unit.records:
        if client >= len(rec.assignments):
            continue
        model = int(rec.assignments[client])
        why = "no model yet (it has not taken part)" if model < 0 else explain(unit, rec, client, model)
        acc = rec.client_accuracy[client] if client < len(rec.client_accuracy) else None
        rows.append({"round": rec.round, "model": model, "moved": prev is not None and model != prev,
                     "why": why, "own accuracy": None if acc is None else 100 * acc})
        prev = model
    return rows


def loss_figure(unit, client: int) -> go.Figure:
    """The client's loss on every model over the rounds (lines), the model it took marked on each round.

    Plain dicts through figures.figure_from (no plotly validation): the drill-down is redrawn in the live fragment
    about once a second for every watcher with a client picked."""
    rounds, rows, took = [], [], []
    for rec in unit.records:
        row = _row(rec, client)
        if row is not None:
            rounds.append(rec.round)
            rows.append(row)
            took.append(int(rec.assignments[client]))
    data, notes = [], []
    if rows:
        mat = np.vstack(rows)
        for m in range(mat.shape[1]):
            data.append(dict(type="scatter", x=rounds, y=mat[:, m], mode="lines", name=f"model {m}",
                             line=dict(color=model_color(m), width=1.8)))
        data.append(dict(type="scatter", x=rounds, y=[mat[i, t] if t >= 0 else None for i, t in enumerate(took)],
                         mode="markers", name="model it took",
                         marker=dict(size=11, symbol="circle-open", color="#222", line=dict(width=2))))
    else:
        notes.append(dict(text="no loss vectors recorded for this client", showarrow=False, x=0.5, y=0.5,
                          xref="paper", yref="paper"))
    lay = house(300, xaxis=axis("round", gridcolor=GRID), yaxis=axis("its loss on each model", gridcolor=GRID))
    if notes:
        lay["annotations"] = notes
    # entries of one width: the legend wraps into a grid whose rows the chart helper counts exactly, so the band
    # it keeps above them for plotly's toolbar is tall enough in a half column at 800 px (cfl_ui.charts.draw)
    lay["legend"].update(entrywidth=ENTRY_WIDTH, entrywidthmode="pixels")
    return figure_from(data, lay)


ENTRY_WIDTH = 66  # px of text per legend entry: "model it took" is 63 px at 11 px; two entries fit in 230 px


def clicked(chart_key: str):
    """The client id of the point last selected in an embedding chart (its customdata), None when none is."""
    state = st.session_state.get(chart_key)
    try:
        points = state.selection.points if state is not None else []
    except AttributeError:
        points = (state or {}).get("selection", {}).get("points", [])
    for p in points or []:
        data = p.get("customdata")
        if isinstance(data, (list, tuple)):
            data = data[0] if data else None
        if data is not None:
            return int(data)
    return None


def panel(units, key: str, chart_keys=()) -> None:
    """The drill-down under a run's charts: pick a client (or click it in the embedding) and read its story."""
    clients = sorted({c for u in units for r in u.records[-1:] for c in range(len(r.assignments))})
    if not clients:
        return
    pick = f"{key}.{PICK}"
    for ck in chart_keys:
        c = clicked(ck)
        seen = f"{pick}.seen.{ck}"
        if c is not None and c != st.session_state.get(seen):
            st.session_state[seen] = c
            st.session_state[pick] = c  # a click picks the client (set before its box is drawn)
    with st.expander("Why did this client move?", icon=":material/person_search:",
                     expanded=st.session_state.get(pick) is not None):
        st.selectbox("Client", [None, *clients], key=pick,
                     format_func=lambda c: "— click a point in the embedding, or pick one" if c is None else
                     f"client {c}", help="Clicking a client's point in 'How … sees the clients' picks it here.")
        client = st.session_state.get(pick)
        if client is None:
            return
        cols = st.columns(len(units), gap="large")
        for col, u in zip(cols, units):
            with col:
                rows = reasons(u, client)
                truth = u.records[-1].true_clusters[client] if u.records and u.records[-1].true_clusters else "?"
                moves = sum(1 for r in rows if r["moved"])
                st.markdown(f"**{u.label} · client {client}** (true cluster {truth}) · moved {moves} time(s)")
                chart(lambda u=u: loss_figure(u, client), f"{key}.drill.{u.ref}.loss",
                      cache=("drill", *unit_key(u), client),
                      caption="Its loss on every model, round by round; the ring marks the model it took.")
                st.dataframe(rows, hide_index=True, width="stretch", height=min(320, 36 * (len(rows) + 1)),
                             column_config={"own accuracy": st.column_config.NumberColumn(format="%.1f%%"),
                                            "why": st.column_config.TextColumn("the rule's reason", width="large")})
