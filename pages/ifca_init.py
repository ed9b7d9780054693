"""IFCA initialisation: IFCA vs CLoVE over many seeds and the three init modes, run as a sweep in the background;
results fill in as they finish."""
import streamlit as st

from cfl_core.config import INIT_MODES
from cfl_ui.form import controls as C
from cfl_ui.views import ifca_view
from cfl_ui.form import job_specs as J
from cfl_ui.views.ifca_sweep import IfcaSweep
from cfl_ui.form import url_codec as Q
from cfl_ui.form import session as S
from cfl_ui.form import url_sync as U
from cfl_ui.charts.literal import md
from cfl_ui.views.live_view import live_fragment
from cfl_ui.form.panel import Panel
from cfl_ui.form.preset_picker import preset_picker
from cfl_ui.form.presets import SIGNATURE_PRESET, preset_config
from cfl_ui.charts.theme import page_header
from cfl_ui.form.verdicts import validate

P = "ifc"
ALGOS_KEY, MODES_KEY, SEEDS_KEY, RUN_KEY = f"{P}.algos", f"{P}.modes", f"{P}.seeds", f"{P}.run"
DEFAULT_ALGOS = [a for a in ("ifca", "clove") if a in J.INIT_ALGOS]


def chosen_algos() -> list:
    return [a for a in st.session_state.get(ALGOS_KEY, []) if a in J.INIT_ALGOS]


def chosen_modes() -> list:
    return [m for m in st.session_state.get(MODES_KEY, []) if m in INIT_MODES]


def load_run_config(ref):
    """A link to a job: its algorithms, modes and seeds into the page's controls, its first run's config."""
    snap = S.snapshot(ref)
    if snap is None or not snap.units:
        return None
    st.session_state[ALGOS_KEY] = sorted({u.tags.get("algorithm", u.algorithm) for u in snap.units},
                                         key=lambda a: J.INIT_ALGOS.index(a) if a in J.INIT_ALGOS else 99)
    st.session_state[MODES_KEY] = [m for m in INIT_MODES if m in {u.tags.get("init") for u in snap.units}]
    seeds = sorted({u.tags.get("seed", 0) for u in snap.units})
    st.session_state[SEEDS_KEY] = len(seeds)
    return {**snap.units[0].config, "seed": seeds[0] if seeds else 0}


def build(values):
    return J.init_configs(values, chosen_algos(), chosen_modes(), st.session_state.get(SEEDS_KEY))


panel = Panel(P)
extra = U.sync_from_url(P, load_run_config=load_run_config,
                        page_default={**preset_config(SIGNATURE_PRESET), "rounds": 10})
if extra is not None:
    if extra.get("algos"):
        st.session_state[ALGOS_KEY] = [a for a in Q.split_list(extra["algos"]) if a in J.INIT_ALGOS]
    if extra.get("modes"):
        st.session_state[MODES_KEY] = [m for m in Q.split_list(extra["modes"]) if m in INIT_MODES]
    if extra.get("seeds"):
        seeds, note = J.seeds_from_link(extra["seeds"])
        if note:
            U.add_notes(P, [note])
        else:
            st.session_state[SEEDS_KEY] = seeds
    st.session_state[RUN_KEY] = extra.get("run")  # a link to a job of the page's older form
st.session_state.setdefault(ALGOS_KEY, list(DEFAULT_ALGOS))
st.session_state.setdefault(MODES_KEY, list(INIT_MODES))
st.session_state.setdefault(SEEDS_KEY, 10)

with st.sidebar:
    preset_picker(panel)
    st.markdown("### Setting")
    panel.data_controls(st.sidebar)
    panel.pair("models", "rounds", st.sidebar, models={"help": "K-hat: the models IFCA and CLoVE keep."})
    panel.pair("local_epochs", "lr", st.sidebar)
    st.markdown("### Seeds and initialisations")
    c1, c2 = st.columns(2)
    c1.number_input("Seeds", key=SEEDS_KEY, step=1, format="%d",
                    help="How many seeds per algorithm and init mode (each seed: new data draw and new models).")
    panel.slots["seeds"] = c1.empty()
    panel.widget("seed", c2, label="First seed")
    st.multiselect("Init modes", list(INIT_MODES), key=MODES_KEY,
                   help="same: one random model copied K times; different: K independent models; "
                        "restarts: redraw until every model wins some clients at round 0.")
    panel.slots["modes"] = st.empty()
    st.multiselect("Algorithms", J.INIT_ALGOS, key=ALGOS_KEY, format_func=C.algorithm_label,
                   help="Algorithms that use the init modes (from the registry).")
    panel.slots["algorithm"] = st.empty()
    panel.widget("device", st.sidebar)
    panel.advanced_controls(st.sidebar, dynamics=False)
    panel.general_slot(st.sidebar)

verdict = validate(panel, build, parallel=False)
sweep = IfcaSweep(P, verdict, chosen_algos(), chosen_modes(), st.session_state.get(SEEDS_KEY))
run_box = st.sidebar.container(key="cfl-runbar-side")  # hidden where the sidebar starts collapsed (cfl_ui.charts.theme)
run_box.markdown("### Run")
sweep.buttons(run_box)

page_header("IFCA initialisation",
            "IFCA gives each client the model with the lowest loss. Start every model from the <b>same</b> weights "
            "and all losses tie: every client picks model 0 and the clusters are never found. CLoVE clusters the "
            "loss <i>vectors</i> instead. Here both run over many seeds and the three init modes.")
sweep.buttons(st.container(key="cfl-runbar-main"), copy="main")  # narrow windows: the sidebar is collapsed
U.show_url_notes(P)
sweep.flash()

ref = st.session_state.get(RUN_KEY)
old = S.snapshot(ref) if ref and sweep.state() is None else None
if ref and old is None and sweep.state() is None:
    st.warning(f"Run {md(repr(ref))} was not found; its settings are loaded — press **Run** to run them as a sweep.",
               icon=":material/link:")
if old is not None:
    st.caption("A run of this page's earlier form (a dashboard job), read back; **Run** runs these settings as a "
               "sweep.")
    live_fragment(ref, ifca_view.render, initial_status=old.status)
else:
    sweep.show()

params = U.write_url(P, C.values(P), {"run": st.session_state.get(RUN_KEY) if old is not None else None,
                                      "algos": chosen_algos(), "modes": chosen_modes(),
                                      "seeds": st.session_state.get(SEEDS_KEY)})
U.link_box(params, "The link holds every setting: whoever opens it sees the same sweep (and can resume it).")
