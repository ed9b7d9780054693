"""The Sweeps page's grid: a measure over two swept fields as a heatmap (each cell's mean ± std written in it), and
the table of cells under it. Pure functions of the cells cfl_core.sweep.tables.grid_cells makes."""
from __future__ import annotations

from html import escape

import plotly.graph_objects as go

from cfl_core.sweep.tables import GRID_MEASURES

from .figures import axis, colorscale, figure_from


def measure_text(measure: str, mean, std) -> str:
    if mean is None:
        return "-"
    if measure in ("final_accuracy", "reported_accuracy", "success"):
        return f"{100 * mean:.1f}% ± {100 * (std or 0):.1f}"
    if measure == "first_round_ari_0_9":
        return f"{mean:.1f} ± {std or 0:.1f}"
    return f"{mean:.2f} ± {std or 0:.2f}"


def heatmap_figure(cells: list[dict], row: str, col: str | None, measure: str) -> go.Figure:
    """Rows x columns of the chosen fields, coloured by the measure, each cell's value written in it."""
    # plotly draws a subset of HTML in labels (links too): the values read from results.csv are escaped
    ys = list(dict.fromkeys(escape(str(c[row])) for c in cells))
    xs = list(dict.fromkeys(escape(str(c[col])) for c in cells)) if col else [GRID_MEASURES[measure]]
    z = [[None] * len(xs) for _ in ys]
    text = [[""] * len(xs) for _ in ys]
    for c in cells:
        i, j = ys.index(escape(str(c[row]))), (xs.index(escape(str(c[col]))) if col else 0)
        z[i][j] = c[measure]
        text[i][j] = measure_text(measure, c[measure], c[f"{measure}_std"]) + f"<br>({c['finished']}/{c['runs']})"
    ranged = measure in ("final_ari", "success")
    heat = dict(type="heatmap", z=z, x=xs, y=ys, text=text, texttemplate="%{text}", colorscale=colorscale("Viridis"),
                colorbar={"title": {"text": measure.replace("_", " ")}},
                hovertemplate=f"{escape(row)}=%{{y}}<br>{escape(col or '')}=%{{x}}<br>%{{text}}<extra></extra>")
    if ranged:
        heat.update(zmin=0, zmax=1)
    # plotly's default template (no house style here), as go.Figure wrote it
    return figure_from([heat], {"height": max(260, 80 + 60 * len(ys)), "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
                                "xaxis": axis(escape(col or ""), type="category"),
                                "yaxis": axis(escape(row), type="category", autorange="reversed")})


def cell_rows(cells: list[dict], by: list[str]) -> list[dict]:
    """The mean ± std table under the heatmap: one row per cell."""
    out = []
    for c in cells:
        row = {name: c[name] for name in by}
        row["runs"] = f"{c['finished']}/{c['runs']}"
        for measure, label in GRID_MEASURES.items():
            row[label] = measure_text(measure, c[measure], c[f"{measure}_std"])
        out.append(row)
    return out
