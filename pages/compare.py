"""Compare: several algorithms on the identical federation, from identical initial models, curves overlaid."""
import streamlit as st

from cfl_core.algorithms import ALGORITHMS
from cfl_ui.form import controls as C
from cfl_ui.views import compare_view
from cfl_ui.form import job_specs as J
from cfl_ui.form import url_codec as Q
from cfl_ui.form import session as S
from cfl_ui.form import url_sync as U
from cfl_ui.form.controller import JobController
from cfl_ui.charts.literal import code
from cfl_ui.views.export_view import running_exports
from cfl_ui.views.live_view import POLLING, live_fragment
from cfl_ui.form.panel import Panel
from cfl_ui.form.preset_picker import preset_picker
from cfl_ui.jobs.snapshots import LOCKSTEP
from cfl_ui.charts.theme import page_header

P = "cmp"
ALGOS_KEY = f"{P}.algos"
DEFAULT_ALGOS = [a for a in ("clove", "ifca", "fedavg", "oracle") if a in ALGORITHMS]


def chosen() -> list:
    return list(dict.fromkeys(a for a in st.session_state.get(ALGOS_KEY, []) if a in ALGORITHMS))


def options_for(algorithms: list) -> dict:
    """Each algorithm's options from its own expander (only values that differ from the defaults)."""
    return {algo: C.changed_options(P, algo) for algo in algorithms}


def first_run_config(ref):
    snap = S.snapshot(ref)
    return dict(snap.units[0].config) if snap else None


ctl = JobController(P, "compare", lambda values: J.compare_configs(values, chosen(), options_for(chosen())),
                    J.compare_units, schedule=LOCKSTEP, parallel=True, run_label="Run all")
panel = Panel(P)
extra = U.sync_from_url(P, load_run_config=first_run_config)
if extra is not None and extra.get("algos"):
    given = Q.split_list(extra["algos"])
    st.session_state[ALGOS_KEY] = list(dict.fromkeys(a for a in given if a in ALGORITHMS))  # each once
    ignored = [a for a in given if a not in ALGORITHMS] + (["repeated names"] if len(set(given)) < len(given) else [])
    if ignored:
        U.add_notes(P, [f"algos={extra['algos']!r} in the link: {', '.join(map(repr, ignored))} ignored "
                        "(each algorithm once, from the registry)"])
if extra is not None and extra.get("algo_options"):
    U.apply_algo_options(P, extra["algo_options"])
if extra is not None and extra.get("run") and not extra.get("algos"):
    linked = S.snapshot(extra["run"])
    if linked is not None:
        st.session_state[ALGOS_KEY] = [u.algorithm for u in linked.units if u.algorithm in ALGORITHMS]
U.add_notes(P, ctl.attach(extra))
st.session_state.setdefault(ALGOS_KEY, list(DEFAULT_ALGOS))

with st.sidebar:
    # the run controls first: visible without scrolling at any window height (hidden where the sidebar starts
    # collapsed: the copy under the title takes their place there, cfl_ui.charts.theme)
    run_box = st.container(key="cfl-runbar-side")
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
    panel.training_section(st.sidebar)

verdict = ctl.validate(panel)
ctl.buttons(verdict, run_box)

page_header("Compare",
            "Several algorithms on the <b>identical</b> clients, starting from <b>identical</b> initial models "
            "(same seed), trained round for round: only the algorithm differs.")
ctl.buttons(verdict, st.container(key="cfl-runbar-main"), copy="main")  # narrow windows: sidebar collapsed
U.show_url_notes(P)
ctl.flash()

snap = ctl.snapshot()
if ctl.ref and snap is None:
    st.warning(f"Comparison {code(ctl.ref)} was not found; its settings are loaded — press **Run all** to reproduce it.",
               icon=":material/link:")
if snap is not None:
    live_fragment(ctl.ref, compare_view.render, initial_status=snap.status)
    if snap.status in POLLING:
        running_exports(ctl.ref, lambda s: list(s.units), "cmp.export", draw=compare_view.downloads)
else:
    st.info("Choose the data and at least two algorithms in the sidebar, then press **Run all**. Every algorithm gets "
            "the same clients and the same initial models, so differences come from the algorithms alone.",
            icon=":material/play_circle:")

params = U.write_url(P, C.values(P), {**ctl.link_extra(snap), "algos": chosen(),
                                      "algo_options": U.algo_options_text(options_for(chosen()))})
U.link_box(params, "The link holds every setting and the run.")
