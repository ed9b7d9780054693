"""The Compare page's body and results: the status bar, the results table, the overlaid curves, one heatmap per
algorithm, the CSVs."""
from __future__ import annotations

import streamlit as st

from cfl_core.compare import protocol_note

from ..charts import figures as F
from ..charts.literal import code, md
from ..charts.draw import chart, unit_key
from .export_view import running_exports
from .live_view import POLLING, live_fragment, status_bar
from .run_charts import ari_note, series_of
from ..jobs.snapshots import FAILED
from ..charts.tables import PERCENT, pct, rounds_csv, summary_rows, table_csv
from ..form.page_choices import CMP, compare_options, compared
from ..form.url_sync import algo_options_text, app_url
from ..form.verdicts import not_ready


def results_table(units) -> None:
    rows = summary_rows(units)
    for row, u in zip(rows, units):
        row["open"] = app_url({"run": u.ref})
    shown = [{**row, "final accuracy": pct(row["final accuracy"]), "best accuracy": pct(row["best accuracy"]),
              "reported accuracy": pct(row["reported accuracy"])} for row in rows]
    st.dataframe(shown, hide_index=True, width="stretch", column_config={
        "final accuracy": st.column_config.ProgressColumn("final accuracy", format=PERCENT, min_value=0,
                                                          max_value=100),
        "best accuracy": st.column_config.NumberColumn("best accuracy", format=PERCENT),
        "reported accuracy": st.column_config.NumberColumn("reported accuracy", format=PERCENT,
                                                           help="the accuracy under the run's reporting protocol"),
        "final ARI": st.column_config.NumberColumn("final ARI", format="%.3f"),
        "open": st.column_config.LinkColumn("open", display_text="in Playground ↗",
                                            help="This algorithm's run with every Playground chart"),
    })
    st.caption("Final/best accuracy over the rounds, final ARI against the true clusters, the first round reaching "
               "ARI 0.9, traffic and training time; rows fill in as the rounds run. "
               + protocol_note([{"protocol": row["protocol"]} for row in rows]))


def curves(units) -> None:
    series = series_of(units)
    key = tuple(unit_key(u) for u in units)
    c1, c2 = st.columns(2, gap="medium")
    with c1:
        metric = "accuracy" if F.has_metric(series, "accuracy") else "loss"
        chart(lambda: F.metric_figure(series, [metric], height=340, log_y=metric == "loss"), "cmp.acc",
              cache=("cmp-acc", key),
              title="**Accuracy over rounds**" if metric == "accuracy" else "**Test loss over rounds**",
              caption="Mean test accuracy of the clients on their own model: the oracle (true clusters) is the "
                      "ceiling, FedAvg's single model the floor under cluster structure.")
    with c2:
        without = [u.label for u in units if ari_note(u.records)]
        chart(lambda: F.metric_figure(series, ["ari"], height=340, target=0.9), "cmp.ari", cache=("cmp-ari", key),
              title="**Clusters found (ARI) over rounds**",
              caption="How well each algorithm's grouping matches the true clusters (1 = exact); FedAvg keeps "
                      "everyone together (ARI 0) and the oracle is right by construction."
                      + (f" No line where ARI does not apply (no clusters to score): {', '.join(without)}."
                         if without else ""))
    c3, c4 = st.columns(2, gap="medium")
    with c3:
        chart(lambda: F.metric_figure(series, ["mb"], height=300), "cmp.mb", cache=("cmp-mb", key),
              title="**Traffic**",
              caption="Megabytes sent so far (models down and up, plus loss vectors): the price of looking at every "
                      "model each round, and CLoVE's saving once its assignment freezes.")
    with c4:
        chart(lambda: F.metric_figure(series, ["loss"], height=300), "cmp.loss", cache=("cmp-loss", key),
              title="**Test loss**", caption="Mean test loss of the clients on their own model: lower is better.")


def heatmaps(units) -> None:
    st.markdown("#### Who trains which model, per algorithm")
    cols = st.columns(min(3, len(units)), gap="medium")
    for i, u in enumerate(units):
        with cols[i % len(cols)]:
            st.markdown(f"**{md(u.label)}**")
            if u.records:
                chart(lambda u=u: F.assignment_heatmap(u.records), f"cmp.heat.{u.name}", cache=("heat", *unit_key(u)),
                      caption=F.decimated_note(len(u.records)).strip() or None)
    st.caption("Each row a client (grouped by true cluster), each column a round, coloured by its model: one colour "
               "per cluster block is a recovered structure, one colour everywhere a single global model.")


def render(snap) -> None:
    """Everything Compare shows of a comparison job (redrawn live by cfl_ui.views.live_view.live_fragment)."""
    units = list(snap.units)
    status_bar(snap, units)
    if not any(u.records for u in units):
        if snap.status != FAILED:
            st.info("Preparing the shared clients and models…", icon=":material/hourglass_top:")
        return
    st.markdown("#### Results")
    results_table(units)
    curves(units)
    heatmaps(units)
    if not snap.live:  # a running comparison's files: cfl_ui.views.export_view, under the refreshing fragment
        downloads(units, "cmp")


def downloads(units, key: str, snap=None) -> None:
    """The comparison's files: the results table and every algorithm's rounds (made now, from `units`)."""
    d1, d2, _ = st.columns([1, 1, 2])
    d1.download_button("Results table (CSV)", table_csv(units), "compare.csv", "text/csv", key=f"{key}.dl_csv",
                       icon=":material/download:", width="stretch", on_click="ignore")
    d2.download_button("Per-round metrics (CSV)", rounds_csv(units), "compare-rounds.csv", "text/csv",
                       key=f"{key}.dl_rounds", icon=":material/download:", width="stretch", on_click="ignore")


def page_body(ctl, ctl_blocked: str | None = None) -> dict:
    """The comparison the page shows (live while it runs), or what to do first; returns what the page's link
    carries beside the form."""
    snap = ctl.snapshot()
    if ctl.ref and snap is None:
        st.warning(f"Comparison {code(ctl.ref)} was not found; its settings are loaded — press **Run all** to "
                   "reproduce it.", icon=":material/link:")
    if snap is not None:
        live_fragment(ctl.ref, render, initial_status=snap.status)
        if snap.status in POLLING:
            running_exports(ctl.ref, lambda s: list(s.units), f"{CMP}.export", draw=downloads)
    elif ctl_blocked:
        not_ready(ctl_blocked)
    else:
        st.info("Choose the data and at least two algorithms in the sidebar, then press **Run all**. Every algorithm "
                "gets the same clients and the same initial models, so differences come from the algorithms alone.",
                icon=":material/play_circle:")
    return {**ctl.link_extra(snap), "algos": compared(),
            "algo_options": algo_options_text(compare_options(compared()))}
