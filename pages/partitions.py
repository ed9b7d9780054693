"""Partitions: see the clients' data before training — cluster x class, label mixes, sizes, sample images."""
import streamlit as st

from cfl_ui.form import controls as C
from cfl_ui.views import partition_charts
from cfl_ui.form import url_sync as U
from cfl_ui.form import verdicts as VD
from cfl_ui.form.panel import Panel
from cfl_ui.charts.partition_facts import PARTITION_KEYS
from cfl_ui.form.preset_picker import preset_picker
from cfl_ui.charts.theme import PICKERS_MAIN, page_header

P = "part"

panel = Panel(P)
U.sync_from_url(P)
with st.sidebar:
    preset_picker(panel)
    st.markdown("### Data")
    panel.data_controls(st.sidebar)
    st.markdown("### Inside each cluster")
    for name in ("within", "alpha", "num_classes_per_partition", "quantity_skew", "test_samples_per_client"):
        panel.widget(name, st.sidebar)
    panel.widget("seed", st.sidebar)
    panel.general_slot(st.sidebar)

values = C.values(P)
verdict = VD.validate_partition(panel, values)

page_header("Partitions",
            "The clients before any training: which true cluster each belongs to, which labels and how many "
            "samples it holds, and what makes the clusters differ.")
# where the sidebar is hidden (presenter mode, narrow windows) the preset picker is under the title too
picker, _ = st.container(key=PICKERS_MAIN).columns([1.2, 2.8])
preset_picker(panel, picker, copy="main")
U.show_url_notes(P)

if verdict.adjusted is not None:
    # the requested samples per client do not fit this structure: show the largest that does, and offer it
    asked = values["samples_per_client"]
    values = {**values, "samples_per_client": verdict.adjusted}
    note, use = st.columns([4, 1.3], vertical_alignment="center")
    note.info(f"{asked} samples per client do not fit {values['partition']} here (see the message in the sidebar): "
              f"shown with **{verdict.adjusted}**, the largest that fits without drawing a sample twice.",
              icon=":material/straighten:")
    use.button(f"Use {verdict.adjusted} samples per client", key=f"{P}.fit", width="stretch",
               on_click=lambda n=verdict.adjusted: st.session_state.__setitem__(f"{P}.samples_per_client", n))
if verdict.error is not None and verdict.adjusted is None:
    st.error("This partition cannot be built: see the message by the setting in the sidebar.", icon=":material/warning:")
elif verdict.blocked:
    st.warning(verdict.blocked, icon=":material/lock:")
else:
    with st.spinner("Drawing the partition…"):
        data = partition_charts.facts(values)
    partition_charts.partition_report(values, data, P)
    st.page_link("pages/playground.py", label="Train on this partition in the Playground",
                 icon=":material/arrow_forward:",
                 query_params={k: str(v) if v is not None else "none" for k, v in values.items()
                               if k in PARTITION_KEYS})

U.link_box(U.write_url(P, values), "The link holds every setting: opening it shows this same partition.")
