"""Partitions: see the clients' data before training — cluster x class, label mixes, sizes, sample images."""
import streamlit as st

from cfl_core.data import dataset_info
from cfl_core.errors import ConfigError
from cfl_ui import controls as C
from cfl_ui import urls as U
from cfl_ui import verdicts as VD
from cfl_ui.panel import Panel
from cfl_ui.preset_picker import preset_picker
from cfl_ui import figures as F
from cfl_ui.partition_view import PARTITION_KEYS, partition_config, partition_facts
from cfl_ui.theme import page_header

P = "part"


@st.cache_data(max_entries=32, show_spinner="Drawing the partition…")
def facts(config_items: tuple) -> dict:
    return partition_facts(dict(config_items))


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
problem = VD.check_dataset(panel, values)
error = None
if problem is None:
    try:
        pcfg = partition_config(values)
        pcfg.validate(dataset_info(pcfg.dataset))
    except ConfigError as exc:
        error = exc
        panel.show_error(exc)
    except (TypeError, ValueError) as exc:
        error = exc
        panel.general_slot(st.sidebar)
        panel.slots["general"].error(str(exc))

page_header("Partitions",
            "The clients before any training: which true cluster each belongs to, which labels and how many "
            "samples it holds, and what makes the clusters differ.")
U.show_url_notes(P)

if problem is not None:
    st.warning(problem, icon=":material/lock:")
elif error is not None:
    st.error("This partition cannot be built: see the message by the setting in the sidebar.", icon=":material/warning:")
else:
    data = facts(tuple(sorted((k, values[k]) for k in PARTITION_KEYS)))
    pj = data["partition"]
    clients = pj["clients"]
    n_train = sum(c["n_train"] for c in clients)
    n_test = sum(c["n_test"] for c in clients)
    from cfl_core.partition import PARTITION_HELP

    st.markdown(f"**{values['partition']}** — {PARTITION_HELP.get(values['partition'], '')}")
    m = st.columns(6)
    m[0].metric("Clients", len(clients))
    m[1].metric("True clusters", len({c["cluster"] for c in clients}))
    m[2].metric("Training samples", f"{n_train:,}")
    m[3].metric("Test samples", f"{n_test:,}")
    m[4].metric("Classes", data["num_classes"] or "—")
    m[5].metric("Test sets", "disjoint" if data["test_disjoint"] else "overlapping",
                help="Overlapping: the test pool was too small for every client to get its own samples.")
    if data["task"] == "classification":
        c1, c2 = st.columns(2, gap="medium")
        with c1:
            st.markdown("**Classes per cluster**")
            st.plotly_chart(F.cluster_class_heatmap(clients, data["num_classes"]), key="part.cc", width="stretch")
            st.caption("Training samples of each class (as the clients see their labels) in each true cluster: "
                       "label skew shows as different columns per row, concept shift as swapped columns.")
        with c2:
            st.markdown("**Client sizes**")
            st.plotly_chart(F.client_sizes_figure(clients), key="part.sizes", width="stretch")
            st.caption("Training (solid) and test (light) samples of every client, coloured by true cluster: "
                       "quantity skew makes these bars uneven.")
        st.markdown("**Each client's labels**")
        st.plotly_chart(F.client_labels_figure(clients, data["num_classes"]), key="part.labels", width="stretch")
        st.caption("One bar per client, stacked by class, clients grouped by true cluster (coloured strip): a "
                   "Dirichlet or pathological split makes clients of one cluster differ from each other too.")
    else:
        st.markdown("**Client sizes**")
        st.plotly_chart(F.client_sizes_figure(clients), key="part.sizes", width="stretch")
        st.caption("Training (solid) and test (light) samples of every client, coloured by true cluster.")
        truth = pj.get("truth") or {}
        if truth.get("theta"):
            st.markdown("**True parameters of each cluster** (θ, one row per cluster)")
            st.dataframe([{f"θ{j}": round(v, 3) for j, v in enumerate(row)} | {"cluster": k}
                          for k, row in enumerate(truth["theta"])], hide_index=True)
    if data["rows"]:
        st.markdown("**What the clusters see**")
        st.plotly_chart(F.image_grid_figure(data["rows"]), key="part.images", width="stretch")
        st.caption(data["note"])
    else:
        st.caption(data["note"])
    st.page_link("pages/playground.py", label="Train on this partition in the Playground",
                 icon=":material/arrow_forward:",
                 query_params={k: str(v) if v is not None else "none" for k, v in values.items()
                               if k in PARTITION_KEYS})

U.link_box(U.write_url(P, values), "The link holds every setting: opening it shows this same partition.")
