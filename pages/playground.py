"""Playground (the landing page): pick a preset, press Run, watch clustered FL happen round by round."""
import streamlit as st

from cfl_ui.form import job_specs as J
from cfl_ui.form import page_choices as PC
from cfl_ui.form.controller import JobController
from cfl_ui.form.frame import TrainingPage, training_page
from cfl_ui.jobs.snapshots import LOCKSTEP
from cfl_ui.views.playground_view import page_body

ctl = JobController(PC.PG, "playground", lambda values: J.playground_configs(values, PC.vs_choice()),
                    J.playground_units, schedule=LOCKSTEP, parallel=True, with_step=True, restart_on_change=True,
                    run_help="Train every round to the end (in the background: the page stays usable).",
                    stop_help="Stop: finished rounds stay saved.")


def on_preset(preset) -> None:
    st.session_state[PC.VS_KEY] = preset.vs or PC.NONE
    ctl.release()  # a fresh setting: leave the ended run (it stays in Runs)


def sidebar(panel) -> None:
    st.markdown("### Data")
    panel.data_controls(st.sidebar)
    st.markdown("### Algorithm")
    panel.algorithm_controls(st.sidebar)
    PC.vs_picker(panel)
    algo = st.session_state.get(panel.k("algorithm"))
    panel.model_controls(st.sidebar, algorithms=[algo] + ([PC.vs_choice()] if PC.vs_choice() else []))
    panel.option_controls(algo, st.sidebar)
    panel.training_section(st.sidebar)


page = TrainingPage(
    PC.PG, "Playground",
    "Clients with a hidden cluster structure train together; watch how the algorithm groups them, round by "
    "round. Pick a preset, press <b>Run</b> (or <b>Step</b>), and explore the charts while it trains.",
    "The link holds every setting (and the run): opening it reproduces the same run. "
    "Copy it with the button at the right of the box.",
    load_run_config=PC.playground_run_config, on_link=PC.playground_link(ctl), defaults={PC.VS_KEY: PC.NONE},
    on_preset=on_preset)
training_page(page, sidebar=sidebar, controls=ctl.validated, body=lambda run: page_body(ctl, run.verdict))
