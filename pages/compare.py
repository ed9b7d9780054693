"""Compare: several algorithms on the identical federation, from identical initial models, curves overlaid."""
import streamlit as st

from cfl_ui.form import job_specs as J
from cfl_ui.form import page_choices as PC
from cfl_ui.form.controller import JobController
from cfl_ui.form.frame import TrainingPage, training_page
from cfl_ui.jobs.snapshots import LOCKSTEP
from cfl_ui.views.compare_view import page_body

ctl = JobController(PC.CMP, "compare",
                    lambda values: J.compare_configs(values, PC.compared(), PC.compare_options(PC.compared())),
                    J.compare_units, schedule=LOCKSTEP, parallel=True, run_label="Run all")


def sidebar(panel) -> None:
    st.markdown("### Data")
    panel.data_controls(st.sidebar)
    st.markdown("### Algorithms")
    PC.algorithms_picker(panel)
    panel.model_controls(st.sidebar, algorithms=PC.compared())
    for algo in PC.compared():
        panel.option_controls(algo, st.sidebar)
    panel.training_section(st.sidebar)


page = TrainingPage(
    PC.CMP, "Compare",
    "Several algorithms on the <b>identical</b> clients, starting from <b>identical</b> initial models "
    "(same seed), trained round for round: only the algorithm differs.",
    "The link holds every setting and the run.",
    load_run_config=PC.compare_run_config, on_link=PC.compare_link(ctl),
    defaults={PC.ALGOS_KEY: PC.COMPARE_DEFAULT})
training_page(page, sidebar=sidebar, controls=ctl.validated, body=lambda run: page_body(ctl, run.verdict.blocked))
