"""The chart blocks of a run: headline numbers, how the algorithm sees the clients, who trains which model, curves,
extras, exports.

Each block draws one part of the Playground's picture of a run (a UnitSnapshot)
through the chart helper; the live view (cfl_ui.views.live_view) lays them out for
one run or two side by side, and the Runs page reuses them for saved runs.
"""
from __future__ import annotations

import json

import streamlit as st

from ..charts import conditions_text as CT
from ..charts import figures as F
from .algorithm_views import embedding_views, extra_views
from ..charts.literal import code, md
from ..charts.draw import cached, chart, run_identity, unit_key
from ..charts.embedding import PCA, UMAP, loss_embedding
from ..charts.palette import algorithm_color
from ..charts.tables import metrics_csv, rounds_csv

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
                  "the groups matter (distances are meaningful locally only). UMAP can draw structure that is not "
                  "there: clients whose loss vectors are all alike (a collapsed IFCA) still come out as tidy "
                  "separate blobs — check such groups against PCA.",
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


def _fmt_pct(v):
    return "—" if v is None else f"{v:.1%}"


def _first_ari(records, target=0.9):
    return next((r.round for r in records if r.ari is not None and r.ari >= target), None)


def one_true_cluster(unit) -> bool:
    """Whether the truth is a single cluster: the IID control (whose "clusters" are arbitrary labels of one
    distribution), or records whose true clusters are all one."""
    if unit.config.get("partition") == "iid":
        return True
    truth = [c for c in (unit.records[-1].true_clusters or []) if c is not None] if unit.records else []
    return bool(truth) and len(set(truth)) == 1


def traffic(nbytes: float) -> tuple[str, str]:
    """The headline's traffic label and value: MB, or kB below 1 MB (a linear model sends a few kB: never
    "MB sent 0.0" or "0.1")."""
    if nbytes < 1e6:
        return "kB sent", f"{nbytes / 1e3:.1f}"
    return "MB sent", f"{nbytes / 1e6:.1f}"


def ari_note(records) -> str | None:
    """Why ARI does not apply to these records (an algorithm without clusters, clients without true ones), or
    None when it does: such runs show "n/a", never a score of 0."""
    for r in records:
        extras = r.extras or {}
        if r.ari is not None or extras.get("ari_applicable") is not False:
            return None
    return (records[-1].extras or {}).get("ari_note", "ARI does not apply") if records else None


def headline(unit, where=None, *, columns: int = 6) -> None:
    """Headline numbers of one run: accuracy, ARI, rounds to ARI >= 0.9, MB sent, device, time."""
    where = where or st
    recs = unit.records
    last = recs[-1] if recs else None
    prev = recs[-2] if len(recs) > 1 else None
    if last is not None and last.accuracy is None:
        acc_label, acc = "Test loss", (f"{last.loss:.4g}" if last.loss is not None else "—")
        acc_delta = (None if prev is None or prev.loss is None or last.loss is None
                     else f"{last.loss - prev.loss:+.3g} vs round {prev.round}")
        delta_color = "inverse"
    else:
        acc_label, acc = "Accuracy", _fmt_pct(last.accuracy if last else None)
        acc_delta = (None if prev is None or prev.accuracy is None or last.accuracy is None
                     else f"{(last.accuracy - prev.accuracy) * 100:+.1f} pt vs round {prev.round}")
        delta_color = "normal"
    first = _first_ari(recs)
    ari = "—" if last is None or last.ari is None else f"{last.ari:.2f}"
    not_applicable = ari_note(recs)
    if not_applicable:
        ari = "n/a"
    sent = sum(r.bytes_down + r.bytes_up for r in recs)
    secs = sum(r.seconds or 0 for r in recs)
    device = unit.meta.get("device") or "—"
    acc_help = "Test metric of the last round, each client on its own model."
    if acc_delta is not None:
        acc_help += (" Below it: the change since the previous round" +
                     (", in percentage points (pt: 74.3% -> 74.8% is +0.5 pt)." if acc_label == "Accuracy" else "."))
    if last is not None and one_true_cluster(unit):
        # the truth is one cluster (IID control): ARI against a single label is no score; say what was found
        found = last.models_in_use
        quality = [("Clusters found", "1 (correct)" if found == 1 else f"{found} (truth: 1)", None, "off",
                    "The truth here is one cluster (no cluster structure): keeping one model is the right answer, "
                    "and ARI against a single true label says nothing, so it is not shown as a score."),
                   ("First round with 1 model", str(next((r.round for r in recs if r.models_in_use == 1), None) or
                                                     ("not yet" if unit.live else "never")), None, "off",
                    "The first round in which every client was on the same model (rounds count from 0).")]
    else:
        quality = [("ARI", ari, None, "normal", f"Not applicable: {not_applicable}." if not_applicable else
                    "Adjusted Rand index of the assignment vs the true clusters (1 = exact)."),
                   ("ARI ≥ 0.9 at round", "n/a" if not_applicable else str(first) if first is not None else
                    ("not yet" if unit.live else "never"), None, "off",
                    "The first round whose assignment reaches ARI 0.9 (rounds count from 0).")]
    items = [
        (acc_label, acc, acc_delta, delta_color, acc_help),
        *quality,
        (*traffic(sent), None, "normal", "Models and loss vectors sent down and up so far."),
        ("Device", device, None, "normal", unit.meta.get("device_name") or None),
        ("Train time", f"{secs:.1f} s", None, "normal", "Time spent in the rounds (training and evaluation)."),
    ]
    # the conditions it ran under (cfl_core/conditions): the privacy spent, the unseen clients' scores
    privacy = CT.privacy_headline(recs)
    if privacy is not None:
        items.append((privacy[0], privacy[1], None, "off", privacy[2]))
    items += [(label, value, None, "normal", help_) for label, value, help_ in CT.unseen_headline(recs)]
    cols = where.columns(columns)
    for i, (label, value, delta, color, help_) in enumerate(items):
        cols[i % columns].metric(label, value, delta, delta_color=color, help=help_)
    unprotected = CT.unprotected_note(recs) if privacy is not None else None
    if unprotected:
        where.caption(md(unprotected) + " (sent without noise: the ε above does not cover it).")


def embedding_mark(key: str) -> str:
    """The key of the container around a client embedding (its CSS class starts with st-key-cfl-emb,
    cfl_ui.charts.theme)."""
    return "cfl-emb-" + "".join(ch if ch.isalnum() else "-" for ch in key)


def embedding_block(unit, key: str, method: str, active_round=None, height: int = 470, live: bool = False) -> None:
    recs = unit.records
    label = md(unit.label)  # a run's name: shown literally
    has_loss = unit.meta.get("has_loss_vectors")
    if has_loss is None:
        from cfl_core.algorithms import ALGORITHMS

        cls = ALGORITHMS.get(unit.algorithm)
        has_loss = bool(cls and cls.has_loss_vectors)
    if method == UMAP and recs:
        with st.spinner("UMAP: laying out each round (the server compiles UMAP once, in the background after it "
                        "starts: a switch in its first minute waits for that)…"):
            emb = loss_embedding(recs, method, cache_key=run_identity(unit))
    else:
        emb = loss_embedding(recs, method, cache_key=run_identity(unit)) if recs else None
    if emb is not None:
        st.markdown(f"**How {label} sees the clients** · <span class='cfl-muted'>{emb.detail}</span>",
                    unsafe_allow_html=True)
        cap = {2: "embed_raw2", 3: "embed_raw3"}.get(emb.num_models if emb.method == "raw" else 0,
                                                      "embed_umap" if emb.method == UMAP else "embed_pca")
        if emb.method == "raw" and emb.num_models == 1:
            cap = "embed_pca"
        with st.container(key=embedding_mark(key)):  # marked: a narrow window gives its column the whole width
            attackers = F.attackers_of(recs)
            chart(lambda: F.embedding_figure(emb, active_round, height=height, animate=not live,
                                             attackers=attackers), f"{key}.emb",
                  cache=("emb", *unit_key(unit), method, active_round, height, not live),
                  caption=CAPTIONS[cap] + " Click a client to see why it moved."
                  + (F.replay_note(emb) if not live else ""), select=emb.dims == 2)
        return
    if has_loss:
        st.markdown(f"**How {label} sees the clients**")
        st.info("No loss vectors yet: they appear from the first round in which the algorithm measures them "
                "(CLoVE's round 0 assigns at random).", icon=":material/hourglass_top:")
        return
    views = embedding_views(unit.algorithm, recs, active_round, method if method != "raw" else PCA,
                            run_identity(unit))
    st.markdown(f"**How {label} sees the clients**")
    if not views:
        st.info(f"{label} does not compare clients by their losses, so there is no loss-vector embedding, and "
                "its records hold no per-client features to draw instead.", icon=":material/info:")
        return
    for i, view in enumerate(views):
        view_block(view, f"{key}.embv{i}")


def view_block(view, key: str) -> None:
    """One per-algorithm view (cfl_ui.views.algorithm_views): its title, figure, notes and caption."""
    st.markdown(f"**{md(view.title)}**")  # titles and captions name keys of the records: shown literally
    if view.figure is not None:  # never changed once built; the extras are built once per round count for every
        chart(view.figure, key, shared=True)  # session (unit_extra_views), so serialized once for all of them
    if view.markdown:
        st.markdown(view.markdown)
    st.caption(md(view.caption))


def assignment_block(unit, key: str, with_area: bool = True) -> None:
    attackers = F.attackers_of(unit.records)
    absent = CT.absent_caption(unit.records[-1]) if unit.records else None
    chart(lambda: F.assignment_heatmap(unit.records, attackers=attackers), f"{key}.heat",
          cache=("heat", *unit_key(unit)), title=f"**Who trains which model** · {md(unit.label)}",
          caption=CAPTIONS["heatmap"] + F.decimated_note(len(unit.records))
          + (" An x on the strip: an attacker (malicious client)." if attackers else "")
          + (f" {absent}" if absent else ""))
    if with_area:
        area_block(unit, key)


def area_block(unit, key: str) -> None:
    chart(lambda: F.clients_per_model(unit.records), f"{key}.area", cache=("area", *unit_key(unit)),
          title=f"**Clients per model** · {md(unit.label)}",
          caption=CAPTIONS["area"] + F.decimated_note(len(unit.records)))


def series_of(units) -> list:
    """Each run's records as one coloured line of the overlaid curves."""
    return [F.Series(u.label, u.records, algorithm_color(u.algorithm, i)) for i, u in enumerate(units)]


def curves_block(units, key: str, cols=None) -> None:
    series = series_of(units)
    ck = tuple(unit_key(u) for u in units)
    c1, c2 = cols or st.columns(2)
    with c1:
        if F.has_metric(series, "accuracy"):
            chart(lambda: F.metric_figure(series, ["accuracy"]), f"{key}.acc", cache=("acc", ck),
                  title="**Accuracy over rounds**", caption=CAPTIONS["accuracy"])
        else:
            chart(lambda: F.metric_figure(series, ["loss"]), f"{key}.loss", cache=("loss", ck),
                  title="**Test loss over rounds**", caption=CAPTIONS["loss"])
    with c2:
        notes = {ari_note(u.records) for u in units}
        if None not in notes and notes:
            st.markdown("**Clusters found (ARI) over rounds**")
            st.info(f"ARI does not apply: {'; '.join(sorted(notes))}.", icon=":material/info:")
        else:
            chart(lambda: F.metric_figure(series, ["ari", "nmi"], target=0.9, y_title="agreement with true clusters"),
                  f"{key}.ari", cache=("ari", ck), title="**Clusters found (ARI) over rounds**",
                  caption=CAPTIONS["ari"])


def unit_extra_views(unit, round_index):
    """The algorithm's own views of a run at a round (None: the latest), built once per round count."""
    return cached(("extras", *unit_key(unit), round_index),
                  lambda: extra_views(unit.algorithm, unit.records, round_index))


def extras_block(unit, key: str, round_index) -> None:
    views = unit_extra_views(unit, round_index)
    if not views:
        return
    # a view that is a table (CFL's split log) gets the whole width below the charts: in a third of the page its
    # columns were cut at the right
    table = {i for i, v in enumerate(views) if v.figure is None and v.markdown and "|" in v.markdown}
    tables = [(i, v) for i, v in enumerate(views) if i in table]
    charted = [(i, v) for i, v in enumerate(views) if i not in table]
    if charted:
        cols = st.columns(min(3, len(charted)))
        for n, (i, view) in enumerate(charted):
            with cols[n % len(cols)]:
                view_block(view, f"{key}.x{i}")
    for i, view in tables:
        view_block(view, f"{key}.x{i}")


def rounds_jsonl(records) -> str:
    return "\n".join(r.to_json() for r in records) + ("\n" if records else "")


def exported(kind: str, units, make) -> str:
    """The text of an export file of `units`, made once per round count for every session (cfl_ui.charts.draw.cached):
    when a job ends, every session watching it draws its Export section at once; serializing a 2000-round run's
    records again in each cost 0.3-0.4 s of the interpreter lock per session (benchmarks/SERVER_LOAD.md)."""
    return cached(("export", kind, *(part for u in units for part in unit_key(u))), make)


def exports_block(units, key: str, snap=None) -> None:
    """Download buttons for the runs' records and configs, made now (each file once per round count).

    Only ever drawn outside a refreshing fragment: for an ended job by the page itself, for a running job by
    cfl_ui.views.export_view after its button is pressed (serializing every record at each poll cost about 1 ms a round,
    benchmarks/SERVER_LOAD.md, and a download inside a refreshing fragment is cancelled by its next redraw)."""
    cols = st.columns(4)
    dl = dict(icon=":material/download:", width="stretch", on_click="ignore")  # a press reruns nothing
    if len(units) == 1:
        u = units[0]
        name = (u.ref or "run").replace("/", "_")
        cols[0].download_button("Per-round metrics (CSV)", exported("csv", units, lambda: metrics_csv(u.records)),
                                f"{name}-rounds.csv",
                                "text/csv", key=f"{key}.csv", **dl)
        cols[1].download_button("Config (JSON)", json.dumps(u.config, indent=1, sort_keys=True),
                                f"{name}-config.json", "application/json", key=f"{key}.json", **dl)
        cols[2].download_button("Rounds (JSON lines)", exported("jsonl", units, lambda: rounds_jsonl(u.records)),
                                f"{name}-rounds.jsonl",
                                "application/x-ndjson", key=f"{key}.jsonl", **dl)
        if u.summary:  # once it ended
            cols[3].download_button("Summary (JSON)", json.dumps(u.summary, indent=1, sort_keys=True),
                                    f"{name}-summary.json", "application/json", key=f"{key}.summary", **dl)
        if u.folder:
            st.caption(f"Run folder: {code(u.folder)}")
    else:
        cols[0].download_button("Per-round metrics (CSV)", exported("csvs", units, lambda: rounds_csv(units)),
                                "rounds.csv", "text/csv",
                                key=f"{key}.csv", **dl)
        cols[1].download_button("Configs (JSON)", json.dumps([u.config for u in units], indent=1, sort_keys=True),
                                "configs.json", "application/json", key=f"{key}.json", **dl)
        if snap is not None:
            cols[2].caption(f"Job folder: {code(snap.id)} (one sub-folder per algorithm)")


def method_picker(units, key: str) -> str:
    """PCA or UMAP, shown only when some run has more than 3 models' loss vectors."""
    # every round, not only the latest: a run whose assignment froze measures nothing more, and keeps the toggle
    wide = any(r.loss_matrix is not None and len(r.loss_matrix) and len(r.loss_matrix[0]) > 3
               for u in units for r in u.records)
    if not wide:
        return PCA
    if key not in st.session_state:
        st.session_state[key] = "PCA"
    st.radio("Loss-vector embedding", ["PCA", "UMAP"], key=key, horizontal=True,
             help="PCA: one fixed linear map for every round. UMAP: a non-linear layout per round "
                  "(compiled once per server, in the background after it starts; a switch in the server's first "
                  "minute waits for that, about 20 s on a small CPU).")
    return UMAP if st.session_state[key] == "UMAP" else PCA


def round_picker(units, key: str, live: bool):
    """The round for per-round views (the latest while a run goes on)."""
    rounds = sorted({r.round for u in units for r in u.records})
    if live or len(rounds) < 2:
        return rounds[-1] if rounds else None
    return st.select_slider("Round for the per-round views", rounds, value=rounds[-1], key=key)
