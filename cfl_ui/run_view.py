"""Drawing runs in a page: status, headline numbers, the Playground's charts, exports, live refresh.

Used by the Playground (one run, or two side by side), the Runs page (a saved
run with all the Playground's plots) and, for single runs, Compare and the
IFCA-initialisation explorer's "open" links.
"""
from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict

import streamlit as st

from . import figures as F
from .algorithm_views import embedding_views, extra_views
from .embedding import PCA, UMAP, loss_embedding
from .snapshots import ELSEWHERE, FAILED, FINISHED, INTERRUPTED, LIVE, PAUSED, QUEUED, RUNNING, STOPPED
from .palette import algorithm_color
from .store import metrics_csv

POLL_SECONDS = 1.0
_FIG_LOCK = threading.Lock()
_FIGS: "OrderedDict[tuple, object]" = OrderedDict()


def cached_figure(key: tuple, build):
    """Figures are built once per run, round count and options: a refresh (or a finished unit of a
    running batch) reuses them instead of rebuilding."""
    with _FIG_LOCK:
        fig = _FIGS.get(key)
        if fig is not None:
            _FIGS.move_to_end(key)
            return fig
    fig = build()
    with _FIG_LOCK:
        _FIGS[key] = fig
        while len(_FIGS) > 256:
            _FIGS.popitem(last=False)
    return fig


def _rkey(unit) -> tuple:
    recs = unit.records
    return (unit.ref, unit.folder, len(recs), recs[-1].round if recs else -1)
POLLING = (QUEUED, RUNNING, ELSEWHERE)
STATUS_BADGE = {QUEUED: ":orange-badge[:material/hourglass_top: queued]",
                RUNNING: ":blue-badge[:material/autorenew: running]",
                PAUSED: ":gray-badge[:material/pause: paused]",
                FINISHED: ":green-badge[:material/check_circle: finished]",
                STOPPED: ":gray-badge[:material/stop_circle: stopped]",
                FAILED: ":red-badge[:material/error: failed]",
                INTERRUPTED: ":orange-badge[:material/warning: interrupted]",
                ELSEWHERE: ":blue-badge[:material/autorenew: running elsewhere]"}

CAPTIONS = {
    "embed_raw2": "Each client sits at its loss on model 0 (x) and model 1 (y), coloured by true cluster with the "
                  "symbol of its assigned model: groups that sit apart can be told apart, and on the dotted diagonal "
                  "both models look the same to a client (press ▶ to replay the rounds).",
    "embed_raw3": "Each client sits at its losses on the three models (drag to rotate), coloured by true cluster with "
                  "the symbol of its assigned model: separate groups of colours mean the clusters are visible.",
    "embed_pca": "Each client's loss vector (its loss on every model) projected to 2-D by one PCA fitted on all rounds, "
                 "so the axes never move, coloured by true cluster with the symbol of its assigned model (press ▶ to "
                 "replay the rounds).",
    "embed_umap": "The same loss vectors laid out by UMAP, each round starting from the previous layout, where only "
                  "the groups matter (distances are meaningful locally only).",
    "heatmap": "Each row is a client (grouped by true cluster) and each column a round, coloured by the model it "
               "trained: one colour per cluster block means the clusters were found, one colour everywhere is a "
               "collapse.",
    "area": "How many clients each model serves, round by round: a single band taking every client means the "
            "other models never train (IFCA's collapse).",
    "accuracy": "Mean test accuracy of the clients on the model they were given: finding the clusters is what lets "
                "every client's model fit its own data.",
    "loss": "Mean test loss of the clients on the model they were given (lower is better).",
    "ari": "Agreement of the assignment with the true clusters (1 = found exactly, 0 = chance), solid for ARI and "
           "dotted for NMI, with the 0.9 mark dashed.",
}


# -- small pieces --------------------------------------------------------------------------
def _fmt_pct(v):
    return "—" if v is None else f"{v:.1%}"


PERCENT = "%.1f%%"  # table format for `pct` values: Streamlit's own "percent" drops trailing zeros (91% beside 90.17%)


def pct(v):
    """A 0-1 share as a percentage, for a table column formatted with PERCENT."""
    return None if v is None else 100.0 * v


def _first_ari(records, target=0.9):
    return next((r.round for r in records if r.ari is not None and r.ari >= target), None)


def headline(unit, where=None, *, columns: int = 6) -> None:
    """Headline numbers of one run: accuracy, ARI, rounds to ARI >= 0.9, MB sent, device, time."""
    where = where or st
    recs = unit.records
    last = recs[-1] if recs else None
    prev = recs[-2] if len(recs) > 1 else None
    if last is not None and last.accuracy is None:
        acc_label, acc = "Test loss", (f"{last.loss:.4g}" if last.loss is not None else "—")
        acc_delta = None if prev is None or prev.loss is None or last.loss is None else f"{last.loss - prev.loss:+.3g}"
        delta_color = "inverse"
    else:
        acc_label, acc = "Accuracy", _fmt_pct(last.accuracy if last else None)
        acc_delta = (None if prev is None or prev.accuracy is None or last.accuracy is None
                     else f"{(last.accuracy - prev.accuracy) * 100:+.1f} pt")
        delta_color = "normal"
    first = _first_ari(recs)
    done = unit.status not in LIVE and unit.status not in ("pending", ELSEWHERE)
    ari = "—" if last is None or last.ari is None else f"{last.ari:.2f}"
    mb = sum(r.bytes_down + r.bytes_up for r in recs) / 1e6
    secs = sum(r.seconds or 0 for r in recs)
    device = unit.meta.get("device") or "—"
    items = [
        (acc_label, acc, acc_delta, delta_color, "Test metric of the last round, each client on its own model."),
        ("ARI", ari, None, "normal", "Adjusted Rand index of the assignment vs the true clusters (1 = exact)."),
        ("ARI ≥ 0.9 at round", str(first) if first is not None else ("never" if done else "not yet"), None, "off",
         "The first round whose assignment reaches ARI 0.9 (rounds count from 0)."),
        ("MB sent", f"{mb:.1f}", None, "normal", "Models and loss vectors sent down and up so far."),
        ("Device", device, None, "normal", unit.meta.get("device_name") or None),
        ("Train time", f"{secs:.1f} s", None, "normal", "Time spent in the rounds (training and evaluation)."),
    ]
    cols = where.columns(columns)
    for i, (label, value, delta, color, help_) in enumerate(items):
        cols[i % columns].metric(label, value, delta, delta_color=color, help=help_)


def status_bar(snap, units) -> None:
    badge = STATUS_BADGE.get(snap.status, snap.status)
    done = sum(u.rounds_done for u in units)
    total = sum(u.total_rounds for u in units) or 1
    what = " vs ".join(u.label for u in units)
    cfg = units[0].config
    setting = (f"{cfg.get('dataset')} / {cfg.get('partition')}, {cfg.get('clusters')} clusters × "
               f"{cfg.get('clients_per_cluster')} clients")
    device = snap.device or "—"
    line = (f"{badge} **{what}** · {min(done, total)} of {total} rounds · {setting} · device **{device}**")
    if snap.started:
        line += f" · {snap.elapsed:.1f} s"
    st.markdown(line)
    if snap.status == INTERRUPTED:
        st.warning("Interrupted: the server stopped before this run ended. Every finished round is shown "
                   "(read-only); press Run to run the same settings again.", icon=":material/warning:")
    if snap.status == QUEUED and snap.queue_position:
        st.info(f"Waiting in the queue: position {snap.queue_position}. At most "
                f"{_capacity()} jobs train at once on this server; yours starts when one ends.",
                icon=":material/hourglass_top:")
    if snap.live or snap.status == PAUSED:
        st.progress(min(1.0, done / total), text=f"{done}/{total} rounds")
    if snap.error:
        st.error(f"**The run failed:** {snap.error}", icon=":material/error:")
        if snap.traceback:
            with st.expander("Details (traceback)"):
                st.code(snap.traceback, language=None)


def _capacity() -> int:
    from .session import manager

    return manager().scheduler.capacity


# -- charts -------------------------------------------------------------------------------------
def embedding_block(unit, key: str, method: str, active_round=None, height: int = 470, live: bool = False) -> None:
    recs = unit.records
    label = unit.label
    has_loss = unit.meta.get("has_loss_vectors")
    if has_loss is None:
        from cfl_core.algorithms import ALGORITHMS

        cls = ALGORITHMS.get(unit.algorithm)
        has_loss = bool(cls and cls.has_loss_vectors)
    if method == UMAP and recs:
        with st.spinner("UMAP: laying out each round (its first use compiles, up to ~20 s)…"):
            emb = loss_embedding(recs, method, cache_key=unit.ref)
    else:
        emb = loss_embedding(recs, method, cache_key=unit.ref) if recs else None
    if emb is not None:
        st.markdown(f"**How {label} sees the clients** · <span style='color:#888'>{emb.detail}</span>",
                    unsafe_allow_html=True)
        fig = cached_figure(("emb", *_rkey(unit), method, active_round, height, not live),
                            lambda: F.embedding_figure(emb, active_round, height=height, animate=not live))
        st.plotly_chart(fig, key=f"{key}.emb", width="stretch", config={"displaylogo": False})
        cap = {2: "embed_raw2", 3: "embed_raw3"}.get(emb.num_models if emb.method == "raw" else 0,
                                                      "embed_umap" if emb.method == UMAP else "embed_pca")
        if emb.method == "raw" and emb.num_models == 1:
            cap = "embed_pca"
        st.caption(CAPTIONS[cap])
        return
    if has_loss:
        st.markdown(f"**How {label} sees the clients**")
        st.info("No loss vectors yet: they appear from the first round in which the algorithm measures them "
                "(CLoVE's round 0 assigns at random).", icon=":material/hourglass_top:")
        return
    views = embedding_views(unit.algorithm, recs, active_round, method if method != "raw" else PCA, unit.ref)
    st.markdown(f"**How {label} sees the clients**")
    if not views:
        st.info(f"{label} does not compare clients by their losses, so there is no loss-vector embedding, and "
                "its records hold no per-client features to draw instead.", icon=":material/info:")
        return
    for i, view in enumerate(views):
        _view(view, f"{key}.embv{i}")


def _view(view, key: str) -> None:
    st.markdown(f"**{view.title}**")
    if view.figure is not None:
        st.plotly_chart(view.figure, key=key, width="stretch", config={"displaylogo": False})
    if view.markdown:
        st.markdown(view.markdown)
    st.caption(view.caption)


def assignment_block(unit, key: str, with_area: bool = True) -> None:
    st.markdown(f"**Who trains which model** · {unit.label}")
    fig = cached_figure(("heat", *_rkey(unit)), lambda: F.assignment_heatmap(unit.records))
    st.plotly_chart(fig, key=f"{key}.heat", width="stretch", config={"displaylogo": False})
    st.caption(CAPTIONS["heatmap"])
    if with_area:
        area_block(unit, key)


def area_block(unit, key: str) -> None:
    st.markdown(f"**Clients per model** · {unit.label}")
    fig = cached_figure(("area", *_rkey(unit)), lambda: F.clients_per_model(unit.records))
    st.plotly_chart(fig, key=f"{key}.area", width="stretch", config={"displaylogo": False})
    st.caption(CAPTIONS["area"])


def series_of(units) -> list:
    return [F.Series(u.label, u.records, algorithm_color(u.algorithm, i)) for i, u in enumerate(units)]


def curves_block(units, key: str, cols=None) -> None:
    series = series_of(units)
    ck = tuple(_rkey(u) for u in units)
    c1, c2 = cols or st.columns(2)
    with c1:
        if F.has_metric(series, "accuracy"):
            st.markdown("**Accuracy over rounds**")
            fig = cached_figure(("acc", ck), lambda: F.metric_figure(series, ["accuracy"]))
            st.plotly_chart(fig, key=f"{key}.acc", width="stretch", config={"displaylogo": False})
            st.caption(CAPTIONS["accuracy"])
        else:
            st.markdown("**Test loss over rounds**")
            fig = cached_figure(("loss", ck), lambda: F.metric_figure(series, ["loss"]))
            st.plotly_chart(fig, key=f"{key}.loss", width="stretch", config={"displaylogo": False})
            st.caption(CAPTIONS["loss"])
    with c2:
        st.markdown("**Clusters found (ARI) over rounds**")
        fig = cached_figure(("ari", ck), lambda: F.metric_figure(series, ["ari", "nmi"], target=0.9,
                                                                 y_title="agreement with true clusters"))
        st.plotly_chart(fig, key=f"{key}.ari", width="stretch", config={"displaylogo": False})
        st.caption(CAPTIONS["ari"])


def unit_extra_views(unit, round_index):
    return cached_figure(("extras", *_rkey(unit), round_index),
                         lambda: extra_views(unit.algorithm, unit.records, round_index))


def extras_block(unit, key: str, round_index) -> None:
    views = unit_extra_views(unit, round_index)
    if not views:
        return
    cols = st.columns(min(3, len(views)))
    for i, view in enumerate(views):
        with cols[i % len(cols)]:
            _view(view, f"{key}.x{i}")


def exports_block(units, key: str, snap=None) -> None:
    cols = st.columns(4)
    dl = dict(icon=":material/download:", width="stretch")
    if len(units) == 1:
        u = units[0]
        name = (u.ref or "run").replace("/", "_")
        jsonl = "\n".join(r.to_json() for r in u.records) + ("\n" if u.records else "")
        cols[0].download_button("Per-round metrics (CSV)", metrics_csv(u.records), f"{name}-rounds.csv",
                                "text/csv", key=f"{key}.csv", **dl)
        cols[1].download_button("Config (JSON)", json.dumps(u.config, indent=1, sort_keys=True),
                                f"{name}-config.json", "application/json", key=f"{key}.json", **dl)
        cols[2].download_button("Rounds (JSON lines)", jsonl, f"{name}-rounds.jsonl", "application/x-ndjson",
                                key=f"{key}.jsonl", **dl)
        if u.folder:
            cols[3].caption(f"Run folder: `{u.folder}`")
    else:
        csv = "".join(metrics_csv(u.records, {"algorithm": u.algorithm}).split("\n", 1)[1 if i else 0]
                      for i, u in enumerate(units))
        cols[0].download_button("Per-round metrics (CSV)", csv, "rounds.csv", "text/csv", key=f"{key}.csv", **dl)
        cols[1].download_button("Configs (JSON)", json.dumps([u.config for u in units], indent=1, sort_keys=True),
                                "configs.json", "application/json", key=f"{key}.json", **dl)
        if snap is not None:
            cols[2].caption(f"Job folder: `{snap.id}` (one sub-folder per algorithm)")


def method_picker(units, key: str) -> str:
    """PCA or UMAP, shown only when some run has more than 3 models' loss vectors."""
    wide = any(r.loss_matrix is not None and len(r.loss_matrix) and len(r.loss_matrix[0]) > 3
               for u in units for r in u.records[-3:])
    if not wide:
        return PCA
    if key not in st.session_state:
        st.session_state[key] = "PCA"
    st.radio("Loss-vector embedding", ["PCA", "UMAP"], key=key, horizontal=True,
             help="PCA: one fixed linear map for every round. UMAP: a non-linear layout per round "
                  "(its first use in a server compiles, up to ~20 s on a small CPU).")
    return UMAP if st.session_state[key] == "UMAP" else PCA


def round_picker(units, key: str, live: bool):
    """The round for per-round views (the latest while a run goes on)."""
    rounds = sorted({r.round for u in units for r in u.records})
    if live or len(rounds) < 2:
        return rounds[-1] if rounds else None
    return st.select_slider("Round for the per-round views", rounds, value=rounds[-1], key=key)


def render_units(snap, units, key: str, *, live: bool, exports: bool = True) -> None:
    """Every Playground chart for one run, or two side by side."""
    if not units:
        return
    if not any(u.records for u in units):
        if snap.status not in (FAILED,):
            st.info("Preparing the data and the models; the first round appears in a moment…",
                    icon=":material/hourglass_top:")
        return
    if len(units) == 1:
        u = units[0]
        headline(u)
        left, right = st.columns([11, 9], gap="medium")
        with left:
            method = method_picker(units, f"{key}.method")
            embedding_block(u, f"{key}.{u.ref}", method, live=live)
        with right:
            assignment_block(u, f"{key}.{u.ref}", with_area=False)
        c1, c2, c3 = st.columns(3, gap="medium")
        with c1:
            area_block(u, f"{key}.{u.ref}")
        curves_block(units, key, cols=(c2, c3))
    else:
        cols = st.columns(len(units), gap="large")
        for col, u in zip(cols, units):
            with col:
                st.subheader(u.label)
                headline(u, columns=3)
        method = method_picker(units, f"{key}.method")
        cols = st.columns(len(units), gap="large")
        for col, u in zip(cols, units):
            with col:
                embedding_block(u, f"{key}.{u.ref}", method, height=430, live=live)
        cols = st.columns(len(units), gap="large")
        for col, u in zip(cols, units):
            with col:
                assignment_block(u, f"{key}.{u.ref}")
        curves_block(units, key)
    latest = [unit_extra_views(u, None) for u in units]
    if any(latest):
        st.markdown("#### What else the algorithm recorded")
        per_round = any(v.per_round for views in latest for v in views)
        rnd = round_picker(units, f"{key}.round", live) if per_round else None
        for u, views in zip(units, latest):
            if not views:
                continue
            if len(units) > 1:
                st.markdown(f"**{u.label}**")
            extras_block(u, f"{key}.{u.ref}", rnd)
    if exports:
        with st.expander("Export", expanded=False):
            exports_block(units, key, snap)


def live_fragment(ref: str, render, *, initial_status: str) -> None:
    """Draw a job with `render(snapshot)`, again about once a second while it is queued or running.

    When the status changes (or the first round arrives) the whole page reruns once: buttons
    follow, and polling stops when the job has ended."""
    from .session import snapshot

    poll = initial_status in POLLING
    first = snapshot(ref)
    waiting = first is not None and first.rounds_done == 0

    def body():
        snap = snapshot(ref)
        if snap is None:
            st.warning("This run is gone (deleted?).")
            return
        render(snap)
        if poll and (snap.status != initial_status or (waiting and snap.rounds_done > 0)):
            st.rerun()

    if poll:
        # Poll twice as often until the first round is in, so the first plots show without delay.
        st.fragment(body, run_every=POLL_SECONDS / 2 if waiting else POLL_SECONDS)()
    else:
        body()


def live_view(ref: str, unit_name: str | None, key: str, *, initial_status: str, exports: bool = True) -> None:
    """The Playground's status and charts of a job (one unit, or all of them side by side), kept live."""
    def render(snap):
        units = [snap.unit(unit_name)] if unit_name else list(snap.units)
        units = [u for u in units if u is not None]
        status_bar(snap, units)
        render_units(snap, units, key, live=snap.live, exports=exports)

    live_fragment(ref, render, initial_status=initial_status)


def wait_hint(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(time.time() + seconds))


PAGE_PATHS = ("compare", "ifca-init", "partitions", "runs")


def app_url(query: dict | None = None, page: str = "") -> str:
    """An absolute link to a page of this app (the Playground by default) with query parameters."""
    from urllib.parse import urlencode, urlsplit

    try:
        current = st.context.url or ""
    except Exception:
        current = ""
    parts = urlsplit(current) if current else None
    if parts is None or not parts.netloc:
        base = "/"
    else:
        path = parts.path.rstrip("/")
        last = path.rsplit("/", 1)[-1] if path else ""
        if last in PAGE_PATHS:
            path = path[: -len(last)].rstrip("/")
        base = f"{parts.scheme}://{parts.netloc}{path}/"
    return base + page + (("?" + urlencode(query)) if query else "")


def summary_rows(units) -> list[dict]:
    """One row per run: the comparison table's columns (cfl_core.compare's), live or finished."""
    from cfl_core.records import summarize

    rows = []
    for u in units:
        status = u.status
        s = u.summary or summarize(u.algorithm, list(u.records), status)
        rows.append({
            "algorithm": u.label, "final accuracy": s.get("final_accuracy"), "best accuracy": s.get("best_accuracy"),
            "final ARI": s.get("final_ari"),
            "rounds to ARI≥0.9": _round_text(s.get("first_round_ari_0_9"), u.status),
            "MB sent": round((s.get("total_bytes") or 0) / 1e6, 2), "time (s)": round(s.get("total_seconds") or 0, 2),
            "rounds": f"{u.rounds_done}/{u.total_rounds}", "status": status,
        })
    return rows


def _round_text(value, status) -> str:
    if value is not None:
        return str(value)
    return "never" if status not in LIVE and status not in ("pending", ELSEWHERE) else "not yet"


def table_csv(units) -> str:
    from cfl_core.compare import compare_table
    from cfl_core.records import summarize

    results = {u.name or u.algorithm: (u.summary or summarize(u.algorithm, list(u.records), u.status)) for u in units}
    return compare_table(results)[1]


@st.cache_data(max_entries=32, show_spinner=False)
def partition_facts_cached(config_items: tuple) -> dict:
    from .partition_view import partition_facts

    return partition_facts(dict(config_items))


def partition_preview(values: dict, key: str) -> bool:
    """Sample images of the clusters about to be trained (before any run); False when there are none."""
    from .partition_view import PARTITION_KEYS

    try:
        data = partition_facts_cached(tuple(sorted((k, values.get(k)) for k in PARTITION_KEYS)))
    except Exception:
        return False
    if not data["rows"]:
        return False
    st.plotly_chart(F.image_grid_figure(data["rows"][:4]), key=key, width="stretch", config={"displaylogo": False})
    st.caption(data["note"])
    return True
