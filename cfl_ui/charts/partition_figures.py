"""The Partitions page's figures (cfl_ui.views.partition_charts): classes per cluster, client sizes, each client's
labels and the sample-image grid, in the house style of cfl_ui.charts.figures (plain dicts, not validated again)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .figures import _hex_alpha, axis, colorscale, figure_from, house
from .palette import GRID, cluster_color

def cluster_class_heatmap(clients: list[dict], num_classes: int, height: int = 300) -> go.Figure:
    """Training samples of each class (as the clients see their labels) in each true cluster."""
    clusters = sorted({c["cluster"] for c in clients})
    z = np.zeros((len(clusters), num_classes), dtype=int)
    for c in clients:
        counts = c.get("label_counts") or []
        z[clusters.index(c["cluster"]), : len(counts)] += np.asarray(counts, dtype=int)
    heat = dict(type="heatmap", z=z, x=[str(j) for j in range(num_classes)], y=[f"cluster {c}" for c in clusters],
                colorscale=colorscale("Blues"), text=z, texttemplate="%{text}", textfont=dict(size=10), xgap=1,
                ygap=1, zmin=0, zmax=max(1, int(z.max())), hovertemplate="%{y}, class %{x}: %{z} samples<extra></extra>",
                colorbar=dict(title=dict(text="samples"), thickness=12))
    return figure_from([heat], house(height, legend=False, xaxis=axis("class (label as the clients see it)",
                                                                      type="category"),
                                     yaxis=dict(autorange="reversed")))


def _class_colors(n: int) -> list[str]:
    import plotly.colors as pc

    return pc.sample_colorscale("Viridis", [i / max(1, n - 1) for i in range(n)])


def client_labels_figure(clients: list[dict], num_classes: int, height: int = 320) -> go.Figure:
    """Each client's training labels, stacked by class, clients grouped by true cluster."""
    ordered = sorted(clients, key=lambda c: (c["cluster"], c["id"]))
    x = [f"{c['id']}" for c in ordered]
    data = []
    colors = _class_colors(num_classes)
    for j in range(num_classes):
        ys = [(c.get("label_counts") or [0] * num_classes)[j] if j < len(c.get("label_counts") or []) else 0
              for c in ordered]
        if not any(ys):
            continue
        data.append(dict(type="bar", x=x, y=ys, name=f"class {j}", marker=dict(color=colors[j]),
                         hovertemplate=f"client %{{x}}, class {j}: %{{y}}<extra></extra>"))
    lay = house(height, barmode="stack", bargap=0.15, shapes=_cluster_bands(ordered),
                xaxis=axis("client (grouped by true cluster)", type="category"),
                yaxis=axis("training samples", gridcolor=GRID))
    lay["legend"]["traceorder"] = "normal"
    return figure_from(data, lay)


def _cluster_bands(ordered) -> list[dict]:
    """A coloured band under each cluster's clients on a categorical x axis (layout shapes)."""
    shapes, start = [], 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or ordered[i]["cluster"] != ordered[start]["cluster"]:
            c = ordered[start]["cluster"]
            shapes.append(dict(type="rect", xref="x", yref="paper", x0=start - 0.5, x1=i - 0.5, y0=-0.02, y1=0.0,
                               fillcolor=cluster_color(c), line=dict(width=0)))
            start = i
    return shapes


def client_sizes_figure(clients: list[dict], height: int = 300) -> go.Figure:
    """Training and test samples per client, coloured by true cluster."""
    ordered = sorted(clients, key=lambda c: (c["cluster"], c["id"]))
    x = [str(c["id"]) for c in ordered]
    colors = [cluster_color(c["cluster"]) for c in ordered]
    data = [dict(type="bar", x=x, y=[c["n_train"] for c in ordered], name="train", marker=dict(color=colors),
                 customdata=[c["cluster"] for c in ordered],
                 hovertemplate="client %{x} (cluster %{customdata}): %{y} train samples<extra></extra>"),
            dict(type="bar", x=x, y=[c["n_test"] for c in ordered], name="test",
                 marker=dict(color=[_hex_alpha(c, 0.4) for c in colors]),
                 hovertemplate="client %{x}: %{y} test samples<extra></extra>")]
    return figure_from(data, house(height, barmode="group", bargap=0.2,
                                   xaxis=axis("client (grouped by true cluster)", type="category"),
                                   yaxis=axis("samples", gridcolor=GRID)))


def _grid_domains(n: int, spacing: float) -> list[list[float]]:
    """make_subplots' domains of n equal cells with `spacing` between them, from 0 up (its arithmetic)."""
    sizes = [(1.0 - spacing * (n - 1)) / n] * n
    return [[sum(sizes[:i]) + i * spacing, sum(sizes[:i]) + i * spacing + sizes[i]] for i in range(n)]


def image_grid_figure(rows: list[tuple[str, np.ndarray, list[str]]], height: int | None = None) -> go.Figure:
    """Rows of small images: (row title, images [n, C, H, W] in [0, 1], one caption per image), one cell (an x and
    a y axis, as make_subplots lays them out) per image, square pixels."""
    n_rows = len(rows)
    n_cols = max(len(r[1]) for r in rows) if rows else 1
    xs = _grid_domains(n_cols, 0.012)
    ys = _grid_domains(n_rows, min(0.09, 0.5 / (n_rows - 1)) if n_rows > 1 else 0.05)[::-1]  # row 1 at the top
    lay = house(height or int(95 * n_rows + 40), legend=False, margin=dict(l=110, r=10, t=24, b=6))
    data, titles, labels = [], [], []
    for i, (label, imgs, caps) in enumerate(rows):
        for j in range(n_cols):
            k = i * n_cols + j + 1
            n = k if k > 1 else ""
            lay[f"xaxis{n}"] = dict(anchor=f"y{n}", domain=xs[j], visible=False, constrain="domain")
            lay[f"yaxis{n}"] = dict(anchor=f"x{n}", domain=[max(0.0, ys[i][0]), min(1.0, ys[i][1])], visible=False,
                                    autorange="reversed", constrain="domain", scaleanchor=f"x{n}")
            caption = caps[j] if j < len(caps) else ""
            if caption:  # the theme's text colour: readable on the light and the dark background
                titles.append(dict(text=caption, showarrow=False, font=dict(size=10), x=sum(xs[j]) / 2.0,
                                   xanchor="center", xref="paper", y=lay[f"yaxis{n}"]["domain"][1],
                                   yanchor="bottom", yref="paper"))
            if j >= len(imgs):
                continue
            img = np.asarray(imgs[j], dtype=float)
            if img.shape[0] == 3:
                rgb = (np.clip(img.transpose(1, 2, 0), 0, 1) * 255).astype(np.uint8)
                data.append(dict(type="image", z=rgb, hoverinfo="skip", xaxis=f"x{n}", yaxis=f"y{n}"))
            else:
                data.append(dict(type="heatmap", z=img[0], colorscale=colorscale("Greys"), showscale=False, zmin=0,
                                 zmax=1, hoverinfo="skip", xaxis=f"x{n}", yaxis=f"y{n}"))
        labels.append(dict(text=f"<b>{label}</b>", xref="paper", yref="paper", x=-0.005, xanchor="right",
                           y=1 - (i + 0.5) / n_rows, showarrow=False, font=dict(size=12, color=cluster_color(i))))
    lay["annotations"] = titles + labels
    return figure_from(data, lay)
