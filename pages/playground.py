"""Playground (the landing page): pick a preset, press Run, watch clustered FL happen round by round."""
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
from cfl_ui import session as S
from cfl_ui.estimate import estimate
from cfl_ui.snapshots import ELSEWHERE, LIVE, LOCKSTEP, PAUSED, UnitSpec
from cfl_ui.live_view import live_view
from cfl_ui.paths import parse_ref, runs_dir
from cfl_ui.playground_view import ready
from cfl_ui.theme import page_header

P = "pg"
NONE = "—"
RUN_KEY = f"{P}.run"
VS_KEY = f"{P}.vs"
FLASH_KEY = f"{P}.flash"


# -- the configuration ---------------------------------------------------------------------
def run_config(ref):
    """The config of the run a link points at (when the link carries no config of its own)."""
    snap = S.snapshot(ref)
    if snap is None:
        return None
    parsed = parse_ref(ref)
    unit = snap.unit(parsed[1]) if parsed else None
    unit = unit or snap.units[0]
    if parsed and parsed[1] is None and len(snap.units) == 2:
        st.session_state[VS_KEY] = snap.units[1].algorithm
    elif parsed and parsed[1] is not None:
        st.session_state[VS_KEY] = NONE
    return dict(unit.config)


def vs_choice() -> str:
    value = st.session_state.get(VS_KEY, NONE)
    return value if value in ALGORITHMS else NONE


def build(values: dict) -> list:
    """The validated configs of this page: the algorithm, and the one beside it if any."""
    cfg = ExperimentConfig.from_dict(values)
    cfg.validate()
    vs = vs_choice()
    if vs == NONE:
        return [cfg]
    if vs == cfg.algorithm:
        raise ConfigError("vs", vs, "a different algorithm from the first one (or — for none)")
    return [cfg, comparison_configs(cfg, [cfg.algorithm, vs])[1]]


def units_of(configs: list) -> list:
    if len(configs) == 1:
        return [UnitSpec("", configs[0], C.algorithm_label(configs[0].algorithm))]
    return [UnitSpec(c.algorithm, c, C.algorithm_label(c.algorithm)) for c in configs]


# -- controls (callbacks run before the page is drawn, so buttons show the new state) ---------
def attached_job():
    ref = st.session_state.get(RUN_KEY)
    parsed = parse_ref(ref) if ref else None
    if not parsed:
        return None
    job = S.manager().get(parsed[0])
    if job is None:
        return None
    snap = job.snapshot()
    return job if S.may_control(snap) else None


def _submit(start: str) -> None:
    try:
        configs = build(C.values(P))
    except (ConfigError, TypeError, ValueError) as exc:
        st.session_state[FLASH_KEY] = str(exc)
        return
    est = estimate(configs, parallel=True)
    if not est.ok:
        st.session_state[FLASH_KEY] = est.message()
        return
    old = attached_job()
    if old is not None and old.status in LIVE:
        old.stop()  # new settings replace the paused run (its finished rounds stay on disk)
    label = " vs ".join(C.algorithm_label(c.algorithm) for c in configs)
    job = S.manager().submit(units_of(configs), kind="playground", title=label, owner=S.owner(),
                             schedule=LOCKSTEP, start=start)
    S.remember(job.id)
    st.session_state[RUN_KEY] = job.id


def _same_settings(job) -> bool:
    try:
        configs = build(C.values(P))
    except (ConfigError, TypeError, ValueError):
        return False
    return [u.config for u in job.snapshot().units] == [c.to_dict() for c in configs]


def on_run() -> None:
    job = attached_job()
    if job is not None and job.status == PAUSED and _same_settings(job):
        job.run()
    else:
        _submit("run")


def on_pause() -> None:
    job = attached_job()
    if job is not None:
        job.pause()


def on_step() -> None:
    job = attached_job()
    if job is not None and job.status == PAUSED and _same_settings(job):
        job.step()
    else:
        _submit("step")


def on_stop() -> None:
    job = attached_job()
    if job is not None:
        job.stop()


def on_preset(preset) -> None:
    st.session_state[VS_KEY] = preset.vs or NONE
    job = attached_job()
    if job is None or job.status not in LIVE:
        st.session_state[RUN_KEY] = None  # a fresh setting: leave the finished run (it stays in Runs)


# -- page -------------------------------------------------------------------------------------
panel = Panel(P)
extra = U.sync_from_url(P, load_run_config=run_config)
if extra is not None:
    if "vs" in extra:
        st.session_state[VS_KEY] = extra["vs"] if extra["vs"] in ALGORITHMS else NONE
    if extra.get("run"):
        st.session_state[RUN_KEY] = extra["run"]
        S.remember(extra["run"])
if VS_KEY not in st.session_state:
    st.session_state[VS_KEY] = NONE

with st.sidebar:
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
    panel.model_controls(st.sidebar, algorithms=[algo] + ([vs_choice()] if vs_choice() != NONE else []))
    panel.option_controls(algo, st.sidebar)
    st.markdown("### Training")
    panel.training_controls(st.sidebar)
    panel.advanced_controls(st.sidebar)
    panel.general_slot(st.sidebar)

verdict = VD.validate(panel, build, parallel=True)
ref = st.session_state.get(RUN_KEY)
snap = S.snapshot(ref) if ref else None
job = attached_job()
status = snap.status if snap else None
controllable = job is not None
running = controllable and status in ("queued", "running")
paused = controllable and status == PAUSED

with st.sidebar:
    st.markdown("### Run")
    b1, b2, b3, b4 = st.columns([1.7, 1, 1, 1])
    b1.button("Resume" if paused and job is not None and _same_settings(job) else "Run", key=f"{P}.run_btn",
              type="primary", icon=":material/play_arrow:", on_click=on_run, width="stretch",
              disabled=bool(verdict.blocked) or running,
              help="Train every round to the end (in the background: the page stays usable).")
    b2.button("", key=f"{P}.pause_btn", icon=":material/pause:", on_click=on_pause, disabled=not running,
              help="Pause after the round in progress.", width="stretch")
    b3.button("", key=f"{P}.step_btn", icon=":material/skip_next:", on_click=on_step,
              disabled=running or (bool(verdict.blocked) and not paused), help="Run one round, then pause.",
              width="stretch")
    b4.button("", key=f"{P}.stop_btn", icon=":material/stop:", on_click=on_stop,
              disabled=not (running or paused), help="Stop: finished rounds stay saved.", width="stretch")
    VD.verdict_note(verdict, st)

page_header("Playground",
            "Clients with a hidden cluster structure train together; watch how the algorithm groups them, round by "
            "round. Pick a preset, press <b>Run</b> (or <b>Step</b>), and explore the charts while it trains.")
U.show_url_notes(P)
flash = st.session_state.pop(FLASH_KEY, None)
if flash:
    st.error(flash, icon=":material/warning:")

if ref and snap is None:
    st.warning(f"Run `{ref}` was not found in `{runs_dir()}` (deleted, or saved on another machine). The settings "
               "from the link are loaded: press **Run** to reproduce it — same seed, same data, same initial models.",
               icon=":material/link:")
if snap is not None:
    parsed = parse_ref(ref)
    if snap.from_disk and snap.status != ELSEWHERE:
        st.caption("Opened from disk (read-only): this run is not running in this server. Press **Run** to run "
                   "the same settings again.")
    live_view(ref, parsed[1] if parsed else None, f"{P}.view", initial_status=snap.status)
else:
    ready(C.values(P), vs_choice() if vs_choice() != NONE else None, f"{P}.preview", blocked=bool(verdict.blocked))

current = C.values(P)
params = U.write_url(P, current, {"run": ref if snap is not None else None,
                                  "vs": vs_choice() if vs_choice() != NONE else None})
U.link_box(params, "The link holds every setting (and the run): opening it reproduces the same run. "
                   "Copy it with the button at the right of the box.")
