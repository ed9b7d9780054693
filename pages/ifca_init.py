"""IFCA initialisation: IFCA vs CLoVE over many seeds and the three init modes, run as a sweep in the background;
results fill in as they finish."""
import streamlit as st

from cfl_ui.form import page_choices as PC
from cfl_ui.form.frame import TrainingPage, training_page
from cfl_ui.form.presets import SIGNATURE_PRESET, preset_config
from cfl_ui.views.ifca_sweep import IfcaSweep, page_body


def sidebar(panel) -> None:
    st.markdown("### Setting")
    panel.data_controls(st.sidebar)
    panel.pair("models", "rounds", st.sidebar, models={"help": "K-hat: the models IFCA and CLoVE keep."})
    panel.pair("local_epochs", "lr", st.sidebar)
    st.markdown("### Seeds and initialisations")
    PC.seeds_and_modes(panel)
    panel.widget("device", st.sidebar)
    panel.advanced_controls(st.sidebar, dynamics=False)
    panel.general_slot(st.sidebar)


page = TrainingPage(
    PC.IFC, "IFCA initialisation",
    "IFCA gives each client the model with the lowest loss. Start every model from the <b>same</b> weights "
    "and all losses tie: every client picks model 0 and the clusters are never found. CLoVE clusters the "
    "loss <i>vectors</i> instead. Here both run over many seeds and the three init modes.",
    "The link holds every setting: whoever opens it sees the same sweep; the browser that started it stops and "
    "resumes it.",
    load_run_config=PC.ifca_run_config, page_default={**preset_config(SIGNATURE_PRESET), "rounds": 10},
    on_link=PC.ifca_link, defaults=PC.IFCA_DEFAULTS)
training_page(page, sidebar=sidebar, controls=IfcaSweep.checked, body=page_body)
