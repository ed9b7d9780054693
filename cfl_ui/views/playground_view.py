"""The Playground before its first run: what is about to be trained, the clients themselves, and what the charts
will show."""
from __future__ import annotations

import streamlit as st

from ..form.controls import algorithm_label
from .partition_charts import preview


def ready(values: dict, vs: str | None, key: str, *, blocked: bool) -> None:
    """The setting in one sentence, sample images of its clusters (when the form can run) and a reading guide."""
    from cfl_core.partition import PARTITION_HELP

    st.page_link("pages/lessons.py", label="New here? Start with a guided lesson: five short walk-throughs that "
                 "play themselves", icon=":material/school:")
    k_hat = values.get("models")
    who = algorithm_label(values.get("algorithm")) + (f" and {algorithm_label(vs)} side by side" if vs else "")
    st.info(
        f"**Ready.** {values.get('clusters')} × {values.get('clients_per_cluster')} clients on "
        f"**{values.get('dataset')}** — *{values.get('partition')}*: {PARTITION_HELP.get(values.get('partition'), '')}. "
        f"{who}" + (f" with {k_hat} models" if k_hat else "") + f", {values.get('rounds')} rounds. "
        "Press **Run** (at the top of the sidebar, or under the title in a narrow window).",
        icon=":material/play_circle:")
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.markdown("**The clients you are about to train**")
        if not blocked and not preview(values, key):
            st.caption("(no images for this data set; see the Partitions page for its clients)")
    with right:
        st.markdown("**What you will see**")
        st.markdown("- **How the algorithm sees the clients:** every client as a point placed by its loss on each "
                    "model; colour = its true cluster, symbol = the model it was given.\n"
                    "- **Who trains which model:** clients by rounds; one solid colour per cluster block means the "
                    "clusters were found, one colour everywhere is a collapse.\n"
                    "- **Accuracy and ARI:** how good each client's model is, and how well the grouping matches the "
                    "truth (ARI 1 = exact).\n\n"
                    "Every chart has a camera button (PNG) in its toolbar; the link in the sidebar reproduces "
                    "this exact run.")
