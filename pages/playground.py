"""Playground (the landing page): pick a preset, press Run, watch clustered FL happen round by round."""
import streamlit as st

from cfl_core.algorithms import ALGORITHMS
from cfl_ui.form import controls as C
from cfl_ui.form import job_specs as J
from cfl_ui.form import session as S
from cfl_ui.form import url_sync as U
from cfl_ui.form.controller import JobController
from cfl_ui.charts.literal import code
from cfl_ui.views.live_view import live_view
from cfl_ui.form.panel import Panel
from cfl_ui.jobs.run_refs import parse_ref, runs_dir
from cfl_ui.views.playground_view import ready
from cfl_ui.form.preset_picker import preset_picker
from cfl_ui.jobs.snapshots import ELSEWHERE, LOCKSTEP
from cfl_ui.charts.theme import page_header

P = "pg"
NONE = "—"
VS_KEY = f"{P}.vs"


def vs_choice() -> str | None:
    """The algorithm side by side with the first one, None for none."""
    value = st.session_state.get(VS_KEY, NONE)
    return value if value in ALGORITHMS else None


def other_clients(snap, unit_name: str | None, values: dict) -> bool:
    """Whether the form's data set or partition settings differ from those of the run shown (the unit a link
    names, e.g. one seed of a sweep; else the first: runs side by side share their clients)."""
    from cfl_ui.charts.partition_facts import PARTITION_KEYS

    unit = (snap.unit(unit_name) if unit_name else None) or (snap.units[0] if snap.units else None)
    shown = unit.config if unit is not None else {}
    return any(k in values and k in shown and values[k] != shown[k] for k in PARTITION_KEYS)


def run_config(ref):
    """The config of the run a link points at (when the link carries no config of its own)."""
    snap = S.snapshot(ref)
    if snap is None:
        return None
    parsed = parse_ref(ref)
    unit = (snap.unit(parsed[1]) if parsed else None) or snap.units[0]
    if parsed and parsed[1] is None and len(snap.units) == 2:
        st.session_state[VS_KEY] = snap.units[1].algorithm
    elif parsed and parsed[1] is not None:
        st.session_state[VS_KEY] = NONE
    return dict(unit.config)


ctl = JobController(P, "playground", lambda values: J.playground_configs(values, vs_choice()), J.playground_units,
                    schedule=LOCKSTEP, parallel=True, with_step=True, restart_on_change=True,
                    run_help="Train every round to the end (in the background: the page stays usable).",
                    stop_help="Stop: finished rounds stay saved.")


def on_preset(preset) -> None:
    st.session_state[VS_KEY] = preset.vs or NONE
    ctl.release()  # a fresh setting: leave the ended run (it stays in Runs)


panel = Panel(P)
extra = U.sync_from_url(P, load_run_config=run_config)
if extra is not None and "vs" in extra:
    st.session_state[VS_KEY] = extra["vs"] if extra["vs"] in ALGORITHMS else NONE
U.add_notes(P, ctl.attach(extra))
st.session_state.setdefault(VS_KEY, NONE)

with st.sidebar:
    # the run controls first: visible without scrolling at any window height (hidden where the sidebar starts
    # collapsed: the copy under the title takes their place there, cfl_ui.charts.theme)
    run_box = st.container(key="cfl-runbar-side")
    preset_picker(panel, on_apply=on_preset)
    st.markdown("### Data")
    panel.data_controls(st.sidebar)
    st.markdown("### Algorithm")
    panel.algorithm_controls(st.sidebar)
    algo = st.session_state.get(panel.k("algorithm"))
    choices = [NONE, *[a for a in ALGORITHMS if a != algo]]
    if st.session_state.get(VS_KEY) not in choices:
        st.session_state[VS_KEY] = NONE
    st.selectbox("Side by side with", choices, key=VS_KEY,
                 format_func=lambda a: "— (one algorithm)" if a == NONE else C.algorithm_label(a),
                 help="A second algorithm on the identical clients from the identical initial models, "
                      "trained round for round beside the first.")
    panel.slots["vs"] = st.empty()
    panel.model_controls(st.sidebar, algorithms=[algo] + ([vs_choice()] if vs_choice() else []))
    panel.option_controls(algo, st.sidebar)
    panel.training_section(st.sidebar)

verdict = ctl.validate(panel)
ctl.buttons(verdict, run_box)

page_header("Playground",
            "Clients with a hidden cluster structure train together; watch how the algorithm groups them, round by "
            "round. Pick a preset, press <b>Run</b> (or <b>Step</b>), and explore the charts while it trains.")
ctl.buttons(verdict, st.container(key="cfl-runbar-main"), copy="main")  # narrow windows: sidebar collapsed
U.show_url_notes(P)
ctl.flash()

snap = ctl.snapshot()
if snap is not None and not snap.live and other_clients(snap, ctl.unit_name, C.values(P)):
    # the form now describes other clients (another data set or partition): an ended run's charts would show
    # the old data under the new settings, so the page shows the new setting (the run stays in Runs)
    ctl.release()
    snap = ctl.snapshot()
if ctl.ref and snap is None:
    st.warning(f"Run {code(ctl.ref)} was not found in {code(runs_dir())} (deleted, or saved on another machine). The "
               "settings from the link are loaded: press **Run** to reproduce it — same seed, same data, same initial "
               "models.", icon=":material/link:")
if snap is not None:
    if snap.from_disk and snap.status != ELSEWHERE:
        st.caption("Opened from disk (read-only): this run is not running in this server. Press **Run** to run "
                   "the same settings again.")
    live_view(ctl.ref, ctl.unit_name, f"{P}.view", initial_status=snap.status)
else:
    ready(C.values(P), vs_choice(), f"{P}.preview", blocked=bool(verdict.blocked))

params = U.write_url(P, C.values(P), {**ctl.link_extra(snap), "vs": vs_choice()})
U.link_box(params, "The link holds every setting (and the run): opening it reproduces the same run. "
                   "Copy it with the button at the right of the box.")
