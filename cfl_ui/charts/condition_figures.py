"""Figures of the conditions' lessons: ARI and accuracy against the privacy spent (epsilon), and which model each
unseen client was given against its true cluster. Plain dicts through `figure_from`, like cfl_ui.charts.figures."""
from __future__ import annotations

import numpy as np

from .figures import GRID, _discrete_scale, axis, figure_from, house
from .palette import algorithm_color, cluster_color, model_color


def eps_text(eps) -> str:
    """Epsilon as a lesson writes it: whole numbers from 100 up, one decimal below."""
    return "∞" if eps is None else f"{eps:,.0f}" if eps >= 100 else f"{eps:.1f}"


def privacy_figure(points: dict, height: int = 380):
    """`points`: algorithm label -> [(sigma, epsilon or None for no noise, ARI, accuracy)]; each algorithm's ARI
    (solid, each marker labelled with its sigma) and accuracy (dotted) against epsilon (log axis), and its
    noise-free ARI as a dashed line (its epsilon is infinite). Every marker's customdata is its epsilon as the notes
    write it."""
    data = []
    for i, (label, rows) in enumerate(points.items()):
        color = algorithm_color(label.lower(), i)
        noisy = [r for r in rows if r[1] is not None]
        x, eps = [r[1] for r in noisy], [eps_text(r[1]) for r in noisy]
        data.append(dict(type="scatter", mode="lines+markers+text", name=f"{label} ARI", x=x, y=[r[2] for r in noisy],
                         text=[f"σ {r[0]:g}" for r in noisy], textposition="top center", customdata=eps,
                         textfont=dict(size=10, color=color), line=dict(color=color, width=2.5),
                         marker=dict(size=9, color=color),
                         hovertemplate=f"{label}: " + "%{text} · ε %{customdata} · ARI %{y:.2f}<extra></extra>"))
        data.append(dict(type="scatter", mode="lines+markers", name=f"{label} accuracy", x=x,
                         y=[r[3] for r in noisy], customdata=eps, line=dict(color=color, width=1.5, dash="dot"),
                         marker=dict(size=7, color=color, symbol="square"),
                         hovertemplate=f"{label}: ε " + "%{customdata} · accuracy %{y:.0%}<extra></extra>"))
        clear = next((r for r in rows if r[1] is None), None)
        if clear is not None and noisy:
            data.append(dict(type="scatter", mode="lines", name=f"{label} ARI, no noise", x=[min(x), max(x)],
                             y=[clear[2]] * 2, line=dict(color=color, dash="dash", width=1),
                             hovertemplate=f"{label} without noise: ARI " + "%{y:.2f}<extra></extra>"))
    lay = house(height, xaxis=axis("privacy spent ε (log; smaller = more private)", type="log", gridcolor=GRID),
                yaxis=axis("ARI (solid) · accuracy (dotted)", gridcolor=GRID, range=[-0.35, 1.12]))
    lay["legend"].update(orientation="h", y=-0.22, x=0, yanchor="top", font=dict(size=11))
    lay.update(margin=dict(l=10, r=10, t=30, b=40))
    return figure_from(data, lay)


def unseen_figure(unseen: dict, models: int, training_accuracy, training_ari=None, height: int = 260):
    """Rows: the unseen clients (by true cluster); columns: the models; the cell of the model each was given
    coloured by it, with the client's accuracy on it; the strip on the left its true cluster. The headline above
    (`layout.meta`) carries the drawn numbers: the unseen clients' ARI and accuracy, the training clients'."""
    clients = list(unseen.get("clients") or [])
    truth = np.asarray(unseen.get("true_clusters") or [], dtype=int)
    given = np.asarray(unseen.get("assignments") or [], dtype=int)
    accs = list(unseen.get("client_accuracy") or [None] * len(clients))
    order = np.lexsort((np.arange(len(clients)), truth)) if len(clients) else np.arange(0)
    k = max(models, int(given.max()) + 1 if len(given) else 1)
    z = np.full((len(clients), k), np.nan)
    text = [[""] * k for _ in clients]
    for row, i in enumerate(order):
        if given[i] >= 0:
            z[row, given[i]] = given[i]
            text[row][given[i]] = "—" if accs[i] is None else f"{accs[i]:.0%}"
    rows = [f"client {clients[i]}" for i in order]
    top = int(truth.max()) if len(truth) else 0
    data = [dict(type="heatmap", z=truth[order][:, None], x=["true"], y=rows, showscale=False, zmin=-0.5,
                 zmax=top + 0.5, colorscale=_discrete_scale([cluster_color(c) for c in range(top + 1)]),
                 hovertemplate="%{y}: true cluster %{z}<extra></extra>", xaxis="x", yaxis="y"),
            dict(type="heatmap", z=z, x=[f"model {m}" for m in range(k)], y=rows, zmin=-0.5, zmax=k - 0.5,
                 colorscale=_discrete_scale([model_color(m) for m in range(k)]), showscale=False, text=text,
                 texttemplate="%{text}", textfont=dict(size=13, color="white"), xgap=2, ygap=2,
                 hovertemplate="%{y} → %{x}: accuracy %{text}<extra></extra>", xaxis="x2", yaxis="y2")]
    acc, ari = unseen.get("accuracy"), unseen.get("ari")
    head = (f"unseen ARI {'—' if ari is None else f'{ari:.2f}'} · accuracy {'—' if acc is None else f'{acc:.0%}'}"
            f" (training clients {'—' if training_accuracy is None else f'{training_accuracy:.0%}'}, ARI "
            f"{'—' if training_ari is None else f'{training_ari:.2f}'})")
    lay = house(height, legend=False, plot_bgcolor="#f4f4f4",
                xaxis=dict(anchor="y", domain=[0.0, 0.1], showgrid=False, side="top"),
                yaxis=dict(anchor="x", domain=[0.0, 1.0], autorange="reversed", showgrid=False),
                xaxis2=dict(anchor="y2", domain=[0.14, 1.0], showgrid=False, side="top"),
                yaxis2=dict(anchor="x2", domain=[0.0, 1.0], matches="y", showticklabels=False, showgrid=False),
                meta=[head], margin=dict(l=10, r=10, t=62, b=10),
                annotations=[dict(text=head, x=0, y=1.0, xref="paper", yref="paper", yshift=30, xanchor="left",
                                  yanchor="bottom", showarrow=False, font=dict(size=12))])
    return figure_from(data, lay)
