"""The IFCA-initialisation page's figures: how many seeds recover the clusters, and the spread of every seed's final
value, per init mode and algorithm (plain dicts in the house style of cfl_ui.charts.figures)."""
from __future__ import annotations

import plotly.graph_objects as go

from .figures import axis, figure_from, house
from .palette import GRID


def success_figure(rows: list[dict], algorithms: list[str], modes: list[str], labels: dict[str, str],
                   colors: dict[str, str], height: int = 330) -> go.Figure:
    """Share of seeds whose final ARI is 1, per init mode (x) and algorithm (colour)."""
    data = []
    for algo in algorithms:
        ys, texts = [], []
        for mode in modes:
            done = [r for r in rows if r["algorithm"] == algo and r["init"] == mode and r["final_ari"] is not None]
            wins = sum(1 for r in done if r["final_ari"] >= 0.9999)
            ys.append(wins / len(done) if done else None)
            texts.append(f"{wins}/{len(done)}" if done else "")
        data.append(dict(type="bar", x=list(modes), y=ys, name=labels.get(algo, algo), marker=dict(color=colors[algo]),
                         text=texts, textposition="outside", cliponaxis=False,
                         hovertemplate=labels.get(algo, algo) + ", init %{x}: %{text} seeds recover the clusters"
                                                                "<extra></extra>"))
    return figure_from(data, house(height, barmode="group", bargap=0.25, xaxis=axis("initialisation"),
                                   yaxis=axis("seeds with final ARI = 1", tickformat=".0%", range=[0, 1.15],
                                              gridcolor=GRID)))


def spread_figure(rows: list[dict], algorithms: list[str], modes: list[str], labels: dict[str, str],
                  colors: dict[str, str], metric: str = "final_ari", height: int = 330) -> go.Figure:
    """Every seed's final value (points) and their spread (box), per init mode and algorithm."""
    data = []
    for algo in algorithms:
        sel = [r for r in rows if r["algorithm"] == algo and r.get(metric) is not None]
        data.append(dict(
            type="box", x=[r["init"] for r in sel], y=[r[metric] for r in sel], name=labels.get(algo, algo),
            boxpoints="all", jitter=0.45, pointpos=0, line=dict(width=1.2),
            marker=dict(color=colors[algo], size=7, opacity=0.8, line=dict(width=0.5, color="white")),
            customdata=[[r["seed"], r["ref"]] for r in sel],
            hovertemplate=labels.get(algo, algo) + ", init %{x}, seed %{customdata[0]}: %{y:.3f}<extra></extra>"))
    yaxis = axis("final ARI" if metric == "final_ari" else "final accuracy", gridcolor=GRID)
    if metric == "final_ari":
        yaxis["range"] = [-0.08, 1.08]
    return figure_from(data, house(height, boxmode="group", yaxis=yaxis,
                                   xaxis=axis("initialisation", categoryorder="array", categoryarray=list(modes))))
