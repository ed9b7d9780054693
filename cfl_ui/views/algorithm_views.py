"""Per-algorithm views: how each algorithm's own records are drawn in the dashboard.

The pages never name an algorithm. For the selected run and round they ask
this registry for

- `embedding_views(algorithm, records, round)`: how the algorithm sees the
  clients, for algorithms WITHOUT loss vectors (loss-vector algorithms get the
  loss-vector embedding). Registered functions first; otherwise any per-client
  feature matrix found in the records' extras is embedded (PCA); otherwise
  nothing, and the page says plainly that this algorithm has none.
- `extra_views(algorithm, records, round)`: further charts (registered ones,
  then every numeric extra recorded per round, as curves).

To add views for an algorithm (e.g. CFL's update norms and similarity matrix),
write a function here (or in any module imported here) and register it; no
page changes:

    @register("cfl", embedding=True)
    def cfl_similarity(records, round_index):
        rec = record_at(records, round_index)
        return [View("Cosine similarity of updates", heatmap_figure(...),
                     "Clients of one true cluster should form bright blocks.")]

    @register("cfl")
    def cfl_norms(records, round_index):
        return [View("Update norms", fig, "A split happens when the mean norm falls below eps1 ...",
                     consumes=("mean_norm", "max_norm"))]

A view function gets every record so far (a sequence of cfl_core.records.RoundRecord,
oldest first) and the selected round number, and returns a list of `View`s.
It must be quick (it runs on every refresh while a job runs) and must not
change the records. `consumes` names extras keys the view already shows, so the
generic "recorded numbers" curves leave them out.

The figures here are plain dicts in the house style (cfl_ui.charts.figures.house), wrapped without plotly's validation
(cfl_ui.charts.figures.figure_from), as the live charts are: they are rebuilt while a job runs, for every watcher, and
validated graph objects cost tens of ms a figure (a CLoVE run's views: about 25 ms, 1 ms as dicts). plotly.js
draws exactly what the dicts say, so property names must be exact: tests/test_ui_algorithm_views_json.py validates
every registered view's JSON with plotly's schema.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import plotly.graph_objects as go

from ..charts.figures import axis, colorscale, figure_from, house, hline, vline, vrect
from ..charts.palette import GRID, cluster_color, model_color

ViewFn = Callable[[Sequence, int], list]


@dataclass
class View:
    title: str
    figure: go.Figure | None
    caption: str  # one sentence for a learner: what to look at
    markdown: str | None = None  # shown instead of (or under) the figure
    consumes: tuple = field(default_factory=tuple)
    per_round: bool = False  # True: it shows the selected round (the page then offers a round slider)


_EMBEDDINGS: dict[str, list[ViewFn]] = {}
_EXTRAS: dict[str, list[ViewFn]] = {}
# extras that are bookkeeping, not a feature of the algorithm's view of the clients
SKIP_KEYS = {"init_attempts", "init_min_share", "frozen_after", "newcomers", "init_note"}


def register(algorithm: str, *, embedding: bool = False) -> Callable[[ViewFn], ViewFn]:
    """Decorator: add a view function for `algorithm` (embedding=True: it replaces the loss-vector embedding)."""
    def deco(fn: ViewFn) -> ViewFn:
        (_EMBEDDINGS if embedding else _EXTRAS).setdefault(algorithm, []).append(fn)
        return fn
    return deco


def registered(algorithm: str) -> dict[str, list[ViewFn]]:
    return {"embedding": list(_EMBEDDINGS.get(algorithm, [])), "extra": list(_EXTRAS.get(algorithm, []))}


def registered_algorithms() -> list[str]:
    """The algorithms with registered views (embedding or extra), sorted."""
    return sorted(set(_EMBEDDINGS) | set(_EXTRAS))


def record_at(records: Sequence, round_index: int | None):
    """The record of a round (the latest at or before it); None when there are none."""
    if not records:
        return None
    if round_index is None:
        return records[-1]
    best = records[0]
    for r in records:
        if r.round <= round_index:
            best = r
    return best


def _safe(fn, records, round_index) -> list[View]:
    try:
        return list(fn(records, round_index) or [])
    except Exception as exc:  # a broken view must not take the page down
        return [View(f"{getattr(fn, '__name__', 'view')} failed", None,
                     f"This view raised {type(exc).__name__}: {exc}")]


# -- generic views from what the records hold ----------------------------------------
def feature_keys(records) -> list[str]:
    """Extras keys holding a per-client feature matrix (rows = participants or clients)."""
    keys: dict[str, None] = {}
    for r in records:
        for k, v in (r.extras or {}).items():
            if (isinstance(v, list) and v and isinstance(v[0], list) and len(v) in (len(r.participants), len(r.assignments))
                    and not _square(v)):
                keys.setdefault(k, None)
    return list(keys)


def _square(v) -> bool:
    return isinstance(v, list) and len(v) > 1 and all(isinstance(row, list) and len(row) == len(v) for row in v)


def matrix_keys(records) -> list[str]:
    keys: dict[str, None] = {}
    for r in records:
        for k, v in (r.extras or {}).items():
            if _square(v) and len(v) in (len(r.participants), len(r.assignments)):
                keys.setdefault(k, None)
    return list(keys)


def scalar_keys(records) -> list[str]:
    keys: dict[str, None] = {}
    for r in records:
        for k, v in (r.extras or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in SKIP_KEYS:
                keys.setdefault(k, None)
    return list(keys)


def client_heatmap(matrix, clients, truth, scale: str, colorbar_title: str, hovertemplate: str,
                   x_title: str | None = None, y_title: str | None = None, **trace) -> go.Figure:
    """A client x client matrix, rows and columns ordered by true cluster (then client id), labelled
    "client (c<true cluster>)": blocks on the diagonal are the true clusters as the matrix sees them."""
    m = np.asarray(matrix, dtype=float)
    clients, truth = np.asarray(clients), np.asarray(truth)
    order = np.lexsort((clients, truth))
    labels = [f"{int(clients[i])} (c{int(truth[i])})" for i in order]
    data = [dict(type="heatmap", z=m[np.ix_(order, order)], x=labels, y=labels, colorscale=colorscale(scale),
                 colorbar=dict(thickness=12, title=dict(text=colorbar_title)), hovertemplate=hovertemplate, **trace)]
    return figure_from(data, house(420, legend=False, xaxis=axis(x_title, type="category"),
                                   yaxis=axis(y_title, autorange="reversed", type="category")))


def matrix_heatmap(matrix, clients, truth, title_text: str) -> go.Figure:
    """A client x client matrix ordered by true cluster (blocks on the diagonal = clusters seen)."""
    return client_heatmap(matrix, clients, truth, "RdBu", title_text,
                          "client %{y} vs %{x}: %{z:.3f}<extra></extra>", zmid=0)


def generic_embedding(records, round_index, method: str = "pca", cache_key: str | None = None) -> list[View]:
    from ..charts.embedding import extras_source, loss_embedding
    from ..charts.figures import embedding_figure, replay_note

    views = []
    for key in feature_keys(records):
        emb = loss_embedding(records, method, cache_key, source=extras_source(key),
                             axis_name=key + "[{j}]", what=key)
        if emb is not None:
            views.append(View(f"Clients by their '{key}'", embedding_figure(emb, round_index),
                              f"Each point is a client placed by the '{key}' this algorithm recorded "
                              f"({emb.detail}); colour = true cluster, symbol = assigned model: "
                              "clusters the algorithm can tell apart appear as separate groups." + replay_note(emb)))
    for key in matrix_keys(records):
        rec = record_at([r for r in records if _square((r.extras or {}).get(key))], round_index)
        value = (rec.extras or {}).get(key) if rec else None
        if not _square(value):
            continue
        clients = rec.participants if len(value) == len(rec.participants) else list(range(len(value)))
        truth = np.asarray(rec.true_clusters or [0] * len(rec.assignments))[clients]
        views.append(View(f"'{key}' in round {rec.round}", matrix_heatmap(value, clients, truth, key),
                          f"The recorded client-by-client '{key}', ordered by true cluster: strong blocks on the "
                          "diagonal mean the algorithm sees the true clusters.", per_round=True))
    return views


def scalar_views(records, consumed: set[str]) -> list[View]:
    views = []
    for key in scalar_keys(records):
        if key in consumed:
            continue
        xs = [r.round for r in records if isinstance((r.extras or {}).get(key), (int, float))]
        ys = [r.extras[key] for r in records if isinstance((r.extras or {}).get(key), (int, float))]
        if len(set(ys)) <= 1 and len(ys) > 1:
            continue  # a constant says nothing as a curve
        fig = figure_from([dict(type="scatter", x=xs, y=ys, mode="lines+markers", line=dict(color="#555", width=2),
                                marker=dict(size=5), name=key)],
                          house(260, legend=False, xaxis=axis("round", gridcolor=GRID),
                                yaxis=axis(NAMES.get(key, key), gridcolor=GRID)))
        views.append(View(f"Recorded: {NAMES.get(key, key)}", fig,
                          CAPTIONS.get(key, f"'{key}' as the algorithm recorded it, round by round.")))
    return views


NAMES = {"theta_error": "distance to the true parameters", "stable_share": "share of clients that kept their model",
         "k": "clusters chosen"}
CAPTIONS = {
    "theta_error": "Mean distance between each client's model and its cluster's true parameters: "
                   "it shrinks when the right clients train the right model.",
    "stable_share": "Share of participants whose model did not change for the last few rounds; "
                    "CLoVE stops clustering when it reaches the threshold.",
    "k": "The number of clusters chosen this round.",
}


# -- the public entry points ------------------------------------------------------------
def embedding_views(algorithm: str, records, round_index: int | None, method: str = "pca",
                    cache_key: str | None = None) -> list[View]:
    records = list(records)
    out = []
    for fn in _EMBEDDINGS.get(algorithm, []):
        out += _safe(fn, records, round_index)
    if not out:
        out = generic_embedding(records, round_index, method, cache_key)
    return out


def extra_views(algorithm: str, records, round_index: int | None) -> list[View]:
    records = list(records)
    out = []
    for fn in _EXTRAS.get(algorithm, []):
        out += _safe(fn, records, round_index)
    consumed = {k for v in out for k in v.consumes}
    return out + scalar_views(records, consumed)


# -- views of the built-in algorithms ------------------------------------------------------
@register("clove")
def clove_views(records, round_index):
    views = []
    rounds = [r.round for r in records if "stable_share" in (r.extras or {})]
    if rounds:
        share = [r.extras["stable_share"] for r in records if "stable_share" in (r.extras or {})]
        lay = house(260, legend=False, xaxis=axis("round", gridcolor=GRID),
                    yaxis=axis("stable clients", tickformat=".0%", range=[-0.03, 1.08], gridcolor=GRID))
        frozen = next((r.extras["frozen_after"] for r in records if "frozen_after" in (r.extras or {})), None)
        if frozen is not None:
            vline(lay, frozen, dict(color="#2CA02C", dash="dash"), f"clustering stops after round {frozen}")
        fig = figure_from([dict(type="scatter", x=rounds, y=share, mode="lines+markers",
                                line=dict(color="#1F77B4", width=2), name="stable share",
                                hovertemplate="round %{x}: %{y:.0%} stable<extra></extra>")], lay)
        views.append(View("CLoVE: stability", fig,
                          "Share of clients whose model has not changed for a few rounds; once it reaches the "
                          "threshold CLoVE freezes the assignment and stops sending loss vectors (the saving).",
                          consumes=("stable_share",)))
    rec = record_at(records, round_index)
    sil = (rec.extras or {}).get("silhouette") if rec else None
    if isinstance(sil, dict) and sil:
        ks = sorted(sil, key=lambda k: int(k))
        chosen = rec.extras.get("k")
        fig = figure_from([dict(type="bar", x=[int(k) for k in ks], y=[sil[k] for k in ks],
                                marker=dict(color=[model_color(0) if int(k) == chosen else "#bbb" for k in ks]),
                                hovertemplate="K = %{x}: silhouette %{y:.3f}<extra></extra>")],
                          house(260, legend=False, xaxis=axis("number of clusters K", dtick=1),
                                yaxis=axis("silhouette score", gridcolor=GRID)))
        views.append(View(f"CLoVE: choosing K (round {rec.round})", fig,
                          f"Unknown K: silhouette score of each candidate K this round; CLoVE took K = {chosen} "
                          "(a larger K must be clearly better to win).", consumes=("k",), per_round=True))
    ks = [r.extras.get("k") for r in records if "k" in (r.extras or {})]
    if ks and len(set(ks)) > 1:
        rounds_k = [r.round for r in records if "k" in (r.extras or {})]
        fig = figure_from([dict(type="scatter", x=rounds_k, y=ks, mode="lines+markers",
                                line=dict(color="#1F77B4", shape="hv"))],
                          house(260, legend=False, xaxis=axis("round", gridcolor=GRID),
                                yaxis=axis("clusters chosen", dtick=1, gridcolor=GRID)))
        views.append(View("CLoVE: number of clusters", fig,
                          "How many clusters CLoVE's silhouette rule chose each round (unknown K).", consumes=("k",)))
    # a constant k (= K-hat when K is known) says nothing: every CLoVE view consumes it
    for v in views:
        v.consumes = tuple(set(v.consumes) | {"k"})
    return views


@register("ifca")
def ifca_views(records, round_index):
    if not records:
        return []
    first = records[0].extras or {}
    if "init_attempts" not in first:
        return []
    note = first.get("init_note", "")
    md = (f"**Random restarts:** IFCA drew {first['init_attempts']} set(s) of initial models before every model "
          f"won at least {first.get('init_min_share', 0):.0%} of the clients at round 0. {note}")
    return [View("IFCA: initialisation", None, "Restarts trade extra traffic at the start for a usable initialisation.",
                 markdown=md)]


def cluster_swatch(c: int) -> str:
    return f"<span style='color:{cluster_color(c)}'>●</span>"


# -- CFL (Sattler), FlexCFL / FedGroup: views of their own records (cfl_core/algorithms/cfl.py, flexcfl.py) ----------
def _cfl_params(records) -> dict:
    for r in records:
        params = (r.extras or {}).get("cfl_params")
        if isinstance(params, dict):
            return params
    return {}


@register("cfl", embedding=True)
def cfl_similarity(records, round_index):
    rec = record_at([r for r in records if _square((r.extras or {}).get("similarity"))], round_index)
    if rec is None:
        return []
    truth = np.asarray(rec.true_clusters or [0] * len(rec.assignments))[rec.participants]
    return [View(f"CFL: cosine similarity of the updates (round {rec.round})",
                 matrix_heatmap(rec.extras["similarity"], rec.participants, truth, "cosine"),
                 "How CFL sees the clients: the cosine similarity of their weight updates, ordered by true "
                 "cluster. A split cuts where the similarity across the two parts is lowest; blue blocks between "
                 "true clusters are what lets it separate them.", per_round=True)]


@register("cfl")
def cfl_norms(records, round_index):
    rounds = [r for r in records if (r.extras or {}).get("cluster_norms")]
    if not rounds:
        return []
    params = _cfl_params(records)
    data = []
    clusters = sorted({c["cluster"] for r in rounds for c in r.extras["cluster_norms"]})
    for k in clusters:
        pts = [(r.round, c) for r in rounds for c in r.extras["cluster_norms"] if c["cluster"] == k]
        xs = [p[0] for p in pts]
        color = model_color(k)
        data.append(dict(type="scatter", x=xs, y=[p[1]["mean_norm"] for p in pts], mode="lines+markers",
                         name=f"cluster {k}: mean update", line=dict(color=color, width=2), marker=dict(size=4),
                         legendgroup=f"c{k}", hovertemplate="round %{x}: ||mean update|| %{y:.3f}<extra></extra>"))
        data.append(dict(type="scatter", x=xs, y=[p[1]["max_norm"] for p in pts], mode="lines",
                         name=f"cluster {k}: max client", line=dict(color=color, width=1.5, dash="dash"),
                         legendgroup=f"c{k}", hovertemplate="round %{x}: max ||update|| %{y:.3f}<extra></extra>"))
    lay = house(340, xaxis=axis("round", gridcolor=GRID), yaxis=axis("update norm", gridcolor=GRID, rangemode="tozero"))
    for key, text in (("eps1", "eps1: mean must fall below"), ("eps2", "eps2: max must rise above")):
        if isinstance(params.get(key), (int, float)):
            hline(lay, params[key], dict(color="#777", dash="dot", width=1), f"{text} ({params[key]:g})")
    if isinstance(params.get("warmup_rounds"), int) and params["warmup_rounds"] > 0:
        vrect(lay, -0.5, params["warmup_rounds"] - 0.5, "warm-up", fillcolor="#f2f2f2", line=dict(width=0),
              layer="below")
    events = [e for r in records for e in (r.extras or {}).get("split_events", [])]
    for e in events:
        vline(lay, e["round"], dict(color="#2CA02C" if e["accepted"] else "#D62728",
                                    dash="solid" if e["accepted"] else "dot", width=1.5))
    views = [View("CFL: update norms per cluster", figure_from(data, lay),
                  "A cluster splits when the norm of its mean update (solid) is below eps1 while some client's "
                  "update (dashed) is still above eps2: together they are near a stationary point, yet some "
                  "clients pull away. Green lines: accepted splits; red dotted: refused by the gamma check.",
                  consumes=("cluster_norms", "largest_mean_norm", "clusters"))]
    if events:
        rows = ["| round | cluster | children (client ids) | α (largest cross-similarity) | bound √((1−α)/2) | "
                "accepted |", "|---|---|---|---|---|---|"]
        for e in events:
            kids = " / ".join(", ".join(map(str, part)) for part in e["children"])
            rows.append(f"| {e['round']} | {e['cluster']} | {kids} | {e['alpha_cross_max']:.3f} | "
                        f"{e['gamma_bound']:.3f} | {'yes' if e['accepted'] else 'no (γ_max ' + format(e['gamma_max'], 'g') + ')'} |")
        views.append(View("CFL: split events", None,
                          "Every split CFL considered: α is the largest cosine similarity between the updates of the "
                          "two sides; the split is accepted only when CFL's γ_max (recorded with each split) stays "
                          "below the bound √((1−α)/2).",
                          markdown="\n".join(rows)))
    return views


def _edc_views(records, round_index, name: str):
    from ..charts.embedding import loss_embedding
    from ..charts.figures import embedding_figure, replay_note

    latest, by_round = None, {}
    for r in records:  # the EDC rows are recorded when they change: carry the latest forward
        value = (r.extras or {}).get("edc")
        if isinstance(value, list):
            latest = value
        if latest is not None:
            by_round[r.round] = latest

    def source(record):
        rows = by_round.get(record.round)
        if rows is None:
            return None
        clients = [c for c, row in enumerate(rows) if isinstance(row, list)]
        return (clients, [rows[c] for c in clients]) if clients else None

    emb = loss_embedding(records, source=source, axis_name="cos to direction {j}", what="EDC features")
    if emb is None:
        return []
    return [View(f"{name}: clients by their EDC features", embedding_figure(emb, round_index),
                 f"How {name} sees the clients: each point is a client placed by the cosine similarity of its "
                 "pre-training update to the SVD directions of the cold start (its EDC features, "
                 f"{emb.detail}). Colour = true cluster, symbol = group. Clients re-cold-started (newcomers, "
                 "migrations) move when their features are measured again." + replay_note(emb))]


@register("flexcfl", embedding=True)
def flexcfl_edc(records, round_index):
    return _edc_views(records, round_index, "FlexCFL")


@register("fedgroup", embedding=True)
def fedgroup_edc(records, round_index):
    return _edc_views(records, round_index, "FedGroup")


@register("flexcfl")
def flexcfl_migrations(records, round_index):
    rounds = [r for r in records if isinstance((r.extras or {}).get("migrations"), list)]
    if not rounds:
        return []
    moved = [sum(1 for m in r.extras["migrations"] if m["from"] != m["to"]) for r in rounds]
    stayed = [len(r.extras["migrations"]) - n for r, n in zip(rounds, moved)]
    xs = [r.round for r in rounds]
    data = [dict(type="bar", x=xs, y=moved, name="moved to another group", marker=dict(color="#8C564B")),
            dict(type="bar", x=xs, y=stayed, name="re-grouped, same group", marker=dict(color="#C7B0A8"))]
    lay = house(280, barmode="stack", xaxis=axis("round", gridcolor=GRID),
                yaxis=axis("clients cold-started again", gridcolor=GRID, dtick=1))
    for x in (r.round for r in records if (r.extras or {}).get("shift_events")):
        vline(lay, x, dict(color="#bbb", dash="dot", width=1))
    return [View("FlexCFL: migrations", figure_from(data, lay),
                 "Clients whose label mix moved by more than the threshold (earth mover's distance over label "
                 "positions) since they were grouped are cold-started again; dotted lines mark rounds with a "
                 "distribution shift.", consumes=("migrations",))]


# -- k-FED and PACFL: clustering by data distance, one shot at set-up (cfl_core/algorithms/kfed.py, pacfl.py) ------
def setup_rows(records, key: str, ids_key: str):
    """(client ids, rows) a one-shot algorithm recorded at set-up, or None."""
    for r in records:
        extras = r.extras or {}
        rows, ids = extras.get(key), extras.get(ids_key)
        if isinstance(rows, list) and isinstance(ids, list) and len(rows) == len(ids) and rows:
            return ids, rows
    return None


@register("kfed", embedding=True)
def kfed_centres(records, round_index):
    from ..charts.embedding import loss_embedding
    from ..charts.figures import embedding_figure, replay_note

    got = setup_rows(records, "local_centres", "centre_clients")
    if got is None:
        return []
    clients, rows = got
    emb = loss_embedding(records, source=lambda record: (clients, rows), axis_name="centre feature {j}",
                         what="local k-means centres")
    if emb is None:
        return []
    return [View("k-FED: clients by the k-means centres of their inputs", embedding_figure(emb, round_index),
                 f"How k-FED sees the clients: each point is a client placed by the centres of its own inputs "
                 f"({emb.detail}), computed once before training. Colour = true cluster, symbol = the cluster the "
                 "server's k-means gave it. Rotated images move the centres apart; swapped labels (concept shift) "
                 "leave them where they are, so the true clusters overlap and the grouping is chance."
                 + replay_note(emb), consumes=("centre_votes", "centre_clients"))]


def angle_heatmap(matrix, clients, truth) -> go.Figure:
    """A client x client angle matrix (degrees) ordered by true cluster: dark blocks on the diagonal = close."""
    return client_heatmap(matrix, clients, truth, "Viridis", "degrees",
                          "client %{y} vs %{x}: %{z:.1f}°<extra></extra>")


@register("pacfl", embedding=True)
def pacfl_angles(records, round_index):
    got = setup_rows(records, "angles", "angle_clients")
    if got is None:
        return []
    clients, angles = got
    truth = np.asarray(records[0].true_clusters or [0] * len(records[0].assignments))[clients]
    found = (records[0].extras or {}).get("clusters_found")
    return [View("PACFL: angles between the clients' data subspaces", angle_heatmap(angles, clients, truth),
                 "How PACFL sees the clients: the angle between the subspaces spanned by the top singular vectors "
                 "of each client's data, ordered by true cluster (dark = close). Hierarchical clustering of this "
                 f"matrix gave {found} cluster(s), once, before training. Dark blocks on the diagonal mean the "
                 "inputs differ by cluster (rotations); under concept shift every client spans the same subspace "
                 "and the matrix has no blocks.", consumes=("clusters_found", "angle_clients"))]


@register("fedpac", embedding=True)
def fedpac_head_weights(records, round_index):
    rec = record_at([r for r in records if _square((r.extras or {}).get("head_weights"))], round_index)
    if rec is None:
        return []
    clients = np.asarray(rec.participants)
    truth = np.asarray(rec.true_clusters or [0] * len(rec.assignments))[clients]
    fig = client_heatmap(rec.extras["head_weights"], clients, truth, "Blues", "weight",
                         "client %{y} takes %{z:.2f} of client %{x}'s head<extra></extra>",
                         x_title="whose trained head", y_title="client (its personalised head)", zmin=0, zmax=1)
    return [View(f"FedPAC: whose heads each client combines (round {rec.round})", fig,
                 "Each row is a client's personalised classifier as a mix of the participants' trained heads, the "
                 "weights solved by FedPAC's quadratic program from the clients' feature statistics; ordered by "
                 "true cluster. FedPAC forms no clusters (no ARI), but blocks here show which clients it treats as "
                 "alike.", consumes=("head_weights", "prototype_classes"), per_round=True)]


@register("fedsoft", embedding=True)
@register("fedrc", embedding=True)
def membership_weights(records, round_index):
    """FedSoft's and FedRC's soft clusters: each client's membership weights (rows sum to 1) in a round."""
    rec = record_at([r for r in records if isinstance((r.extras or {}).get("memberships"), list)], round_index)
    if rec is None:
        return []
    rows = rec.extras["memberships"]
    truth = rec.true_clusters or [0] * len(rows)
    clients = sorted((c for c, row in enumerate(rows) if isinstance(row, list)), key=lambda c: (truth[c], c))
    if not clients:
        return []
    z = [rows[c] for c in clients]
    labels = [f"{c} (c{truth[c]})" for c in clients]
    data = [dict(type="heatmap", z=z, x=[f"cluster {k}" for k in range(len(z[0]))], y=labels, zmin=0, zmax=1,
                 colorscale=colorscale("Blues"), colorbar=dict(thickness=12, title=dict(text="weight")),
                 hovertemplate="client %{y}: %{z:.2f} on %{x}<extra></extra>")]
    fig = figure_from(data, house(max(260, 18 * len(clients) + 80), legend=False,
                                  xaxis=axis("cluster model", type="category"),
                                  yaxis=axis("client (true cluster)", autorange="reversed", type="category")))
    return [View(f"Membership weights (round {rec.round})", fig,
                 "Each row is a client as a mixture of the cluster models (its weights sum to 1), ordered by true "
                 "cluster: a client of one distribution has one dark cell; a client whose data mixes two clusters "
                 "sits between them, with weight on both. Its cluster in the records is its largest weight.",
                 consumes=("memberships", "drawn"), per_round=True)]
