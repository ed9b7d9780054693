"""Compare: several algorithms on the identical federation, from identical initial models, curves overlaid."""
import streamlit as st

from cfl_core.algorithms import ALGORITHMS
from cfl_core.compare import comparison_configs
from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_ui import controls as C
from cfl_ui import urls as U
from cfl_ui import verdicts as VD
from cfl_ui.panel import Panel
from cfl_ui.preset_picker import preset_picker
from cfl_ui import figures as F
from cfl_ui import params as Q
from cfl_ui import run_view as V
from cfl_ui import session as S
from cfl_ui.jobpage import BatchPage
from cfl_ui.snapshots import LOCKSTEP, UnitSpec
from cfl_ui.palette import algorithm_color
from cfl_ui.theme import page_header

P = "cmp"
ALGOS_KEY = f"{P}.algos"
DEFAULT_ALGOS = [a for a in ("clove", "ifca", "fedavg", "oracle") if a in ALGORITHMS]


def chosen() -> list:
    return [a for a in st.session_state.get(ALGOS_KEY, []) if a in ALGORITHMS]


def options_for(algorithms: list) -> dict:
    """Each algorithm's options from its own expander (only values that differ from the defaults)."""
    return {algo: C.changed_options(P, algo) for algo in algorithms}


def build_configs(values: dict) -> list:
    algos = chosen()
    if len(algos) < 2:
        raise ConfigError("algorithms", ",".join(algos) or "(none)", "at least two algorithms to compare")
    own = options_for(algos)
    base = ExperimentConfig.from_dict({**values, "algorithm": algos[0], "options": own[algos[0]]})
    return comparison_configs(base, algos, own)


def build_units(values: dict):
    configs = build_configs(values)
    units = [UnitSpec(c.algorithm, c, C.algorithm_label(c.algorithm)) for c in configs]
    return units, "Compare " + " · ".join(u.label for u in units)


page = BatchPage(P, "compare", build_units, LOCKSTEP, parallel=True)
panel = Panel(P)
extra = U.sync_from_url(P, load_run_config=lambda ref: dict(S.snapshot(ref).units[0].config) if S.snapshot(ref) else None)
if extra is not None and extra.get("algos"):
    st.session_state[ALGOS_KEY] = [a for a in Q.split_list(extra["algos"]) if a in ALGORITHMS]
if extra is not None and extra.get("algo_options"):
    U.apply_algo_options(P, extra["algo_options"])
if extra is not None and extra.get("run"):
    snap0 = S.snapshot(extra["run"])
    if snap0 is not None and not extra.get("algos"):
        st.session_state[ALGOS_KEY] = [u.algorithm for u in snap0.units if u.algorithm in ALGORITHMS]
page.attach_from_url(extra)
if ALGOS_KEY not in st.session_state:
    st.session_state[ALGOS_KEY] = list(DEFAULT_ALGOS)

with st.sidebar:
    preset_picker(panel)
    st.markdown("### Data")
    panel.data_controls(st.sidebar)
    st.markdown("### Algorithms")
    st.multiselect("Algorithms", list(ALGORITHMS), key=ALGOS_KEY, format_func=C.algorithm_label,
                   help="Each runs on the identical clients from the identical initial models.")
    panel.slots["algorithm"] = st.empty()
    panel.model_controls(st.sidebar, algorithms=chosen())
    for algo in chosen():
        panel.option_controls(algo, st.sidebar)
    st.markdown("### Training")
    panel.training_controls(st.sidebar)
    panel.advanced_controls(st.sidebar)
    panel.general_slot(st.sidebar)

verdict = VD.validate(panel, build_configs, parallel=True)
with st.sidebar:
    st.markdown("### Run")
    page.buttons(verdict, run_label="Run all")

page_header("Compare",
            "Several algorithms on the <b>identical</b> clients, starting from <b>identical</b> initial models "
            "(same seed), trained round for round: only the algorithm differs.")
U.show_url_notes(P)
page.flash()


def render(snap):
    units = list(snap.units)
    V.status_bar(snap, units)
    if not any(u.records for u in units):
        if snap.status != "failed":
            st.info("Preparing the shared clients and models…", icon=":material/hourglass_top:")
        return
    st.markdown("#### Results")
    rows = V.summary_rows(units)
    for row, u in zip(rows, units):
        row["open"] = V.app_url({"run": u.ref})
    shown = [{**row, "final accuracy": V.pct(row["final accuracy"]), "best accuracy": V.pct(row["best accuracy"])}
             for row in rows]
    st.dataframe(shown, hide_index=True, width="stretch", column_config={
        "final accuracy": st.column_config.ProgressColumn("final accuracy", format=V.PERCENT, min_value=0,
                                                          max_value=100),
        "best accuracy": st.column_config.NumberColumn("best accuracy", format=V.PERCENT),
        "final ARI": st.column_config.NumberColumn("final ARI", format="%.3f"),
        "open": st.column_config.LinkColumn("open", display_text="in Playground ↗",
                                            help="This algorithm's run with every Playground chart"),
    })
    st.caption("Final/best accuracy over the rounds, final ARI against the true clusters, the first round reaching "
               "ARI 0.9, traffic and training time; rows fill in as the rounds run.")
    series = [F.Series(u.label, u.records, algorithm_color(u.algorithm, i)) for i, u in enumerate(units)]
    key = tuple(V._rkey(u) for u in units)
    c1, c2 = st.columns(2, gap="medium")
    with c1:
        metric = "accuracy" if F.has_metric(series, "accuracy") else "loss"
        st.markdown("**Accuracy over rounds**" if metric == "accuracy" else "**Test loss over rounds**")
        st.plotly_chart(V.cached_figure(("cmp-acc", key), lambda: F.metric_figure(series, [metric], height=340,
                                                                                  log_y=metric == "loss")),
                        key="cmp.acc", width="stretch")
        st.caption("Mean test accuracy of the clients on their own model: the oracle (true clusters) is the ceiling, "
                   "FedAvg's single model the floor under cluster structure.")
    with c2:
        st.markdown("**Clusters found (ARI) over rounds**")
        st.plotly_chart(V.cached_figure(("cmp-ari", key), lambda: F.metric_figure(series, ["ari"], height=340,
                                                                                  target=0.9)),
                        key="cmp.ari", width="stretch")
        st.caption("How well each algorithm's grouping matches the true clusters (1 = exact); FedAvg keeps everyone "
                   "together (ARI 0) and the oracle is right by construction.")
    c3, c4 = st.columns(2, gap="medium")
    with c3:
        st.markdown("**Traffic**")
        st.plotly_chart(V.cached_figure(("cmp-mb", key), lambda: F.metric_figure(series, ["mb"], height=300)),
                        key="cmp.mb", width="stretch")
        st.caption("Megabytes sent so far (models down and up, plus loss vectors): the price of looking at every "
                   "model each round, and CLoVE's saving once its assignment freezes.")
    with c4:
        st.markdown("**Test loss**")
        st.plotly_chart(V.cached_figure(("cmp-loss", key), lambda: F.metric_figure(series, ["loss"], height=300)),
                        key="cmp.loss", width="stretch")
        st.caption("Mean test loss of the clients on their own model: lower is better.")
    st.markdown("#### Who trains which model, per algorithm")
    cols = st.columns(min(3, len(units)), gap="medium")
    for i, u in enumerate(units):
        with cols[i % len(cols)]:
            st.markdown(f"**{u.label}**")
            if u.records:
                st.plotly_chart(V.cached_figure(("heat", *V._rkey(u)), lambda u=u: F.assignment_heatmap(u.records)),
                                key=f"cmp.heat.{u.name}", width="stretch")
    st.caption("Each row a client (grouped by true cluster), each column a round, coloured by its model: one colour "
               "per cluster block is a recovered structure, one colour everywhere a single global model.")
    d1, d2, _ = st.columns([1, 1, 2])
    d1.download_button("Results table (CSV)", V.table_csv(units), "compare.csv", "text/csv", key="cmp.dl_csv",
                       icon=":material/download:", width="stretch")
    from cfl_ui.store import metrics_csv

    per_round = "".join(metrics_csv(u.records, {"algorithm": u.algorithm}).split("\n", 1)[1 if i else 0]
                        for i, u in enumerate(units))
    d2.download_button("Per-round metrics (CSV)", per_round, "compare-rounds.csv", "text/csv", key="cmp.dl_rounds",
                       icon=":material/download:", width="stretch")


ref = page.ref()
snap = S.snapshot(ref) if ref else None
if ref and snap is None:
    st.warning(f"Comparison `{ref}` was not found; its settings are loaded — press **Run all** to reproduce it.",
               icon=":material/link:")
if snap is not None:
    V.live_fragment(ref, render, initial_status=snap.status)
else:
    st.info("Choose the data and at least two algorithms in the sidebar, then press **Run all**. Every algorithm gets "
            "the same clients and the same initial models, so differences come from the algorithms alone.",
            icon=":material/play_circle:")

params = U.write_url(P, C.values(P), {"run": ref if snap is not None else None, "algos": chosen(),
                                      "algo_options": U.algo_options_text(options_for(chosen()))})
U.link_box(params, "The link holds every setting and the run.")
