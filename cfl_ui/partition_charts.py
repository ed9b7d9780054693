"""The clients before any training, drawn: the Partitions page's numbers and charts, and the Playground's preview
of the clusters.

The partition's facts (cfl_ui.partition_view) are built once per setting of the
fields that define the clients and shared by both.
"""
from __future__ import annotations

import streamlit as st

from . import figures as F
from .charts import chart
from .partition_view import PARTITION_KEYS, partition_facts


IMAGE_ROWS = 8  # clusters shown with sample images (a row each): 40 clusters would make a 4000-px chart


@st.cache_data(max_entries=32, show_spinner=False)
def _facts(config_items: tuple) -> dict:
    return partition_facts(dict(config_items))


def setting(values: dict) -> tuple:
    """The fields of `values` that define the clients (what their partition and its pictures are built from)."""
    return tuple(sorted((k, values.get(k)) for k in PARTITION_KEYS))


def facts(values: dict) -> dict:
    """The partition the values describe (cached per setting of the fields that define the clients)."""
    return _facts(setting(values))


def preview(values: dict, key: str) -> bool:
    """Sample images of the clusters about to be trained (before any run); False when there are none."""
    try:
        data = facts(values)
    except Exception:  # the form is being edited into a setting that cannot be built: no preview
        return False
    if not data["rows"]:
        return False
    # built and encoded once per setting for every session (every fresh Playground draws it)
    chart(lambda: F.image_grid_figure(data["rows"][:4]), key, cache=("preview", repr(setting(values))),
          caption=data["note"])
    return True


def partition_report(values: dict, data: dict, key: str) -> None:
    """The Partitions page's body: headline numbers, classes per cluster, sizes, labels and sample images."""
    from cfl_core.partition import PARTITION_HELP

    pj = data["partition"]
    clients = pj["clients"]
    n_train = sum(c["n_train"] for c in clients)
    n_test = sum(c["n_test"] for c in clients)
    st.markdown(f"**{values['partition']}** — {PARTITION_HELP.get(values['partition'], '')}")
    m = st.columns(6)
    m[0].metric("Clients", len(clients))
    m[1].metric("True clusters", len({c["cluster"] for c in clients}))
    m[2].metric("Training samples", f"{n_train:,}")
    m[3].metric("Test samples", f"{n_test:,}")
    m[4].metric("Classes", data["num_classes"] or "—")
    m[5].metric("Clients' test sets", "each its own" if data["test_disjoint"] else "partly shared",
                help="Test data never overlaps any client's training data. Partly shared: the test pool was too "
                     "small for every client to get test samples of its own, so some clients test on the same "
                     "samples.")
    if data["task"] == "classification":
        c1, c2 = st.columns(2, gap="medium")
        with c1:
            chart(F.cluster_class_heatmap(clients, data["num_classes"]), f"{key}.cc", title="**Classes per cluster**",
                  caption="Training samples of each class (as the clients see their labels) in each true cluster: "
                          "label skew shows as different columns per row, concept shift as swapped columns.")
        with c2:
            chart(F.client_sizes_figure(clients), f"{key}.sizes", title="**Client sizes**",
                  caption="Training (solid) and test (light) samples of every client, coloured by true cluster: "
                          "quantity skew makes these bars uneven.")
        chart(F.client_labels_figure(clients, data["num_classes"]), f"{key}.labels", title="**Each client's labels**",
              caption="One bar per client, stacked by class, clients grouped by true cluster (coloured strip): a "
                      "Dirichlet or pathological split makes clients of one cluster differ from each other too.")
    else:
        chart(F.client_sizes_figure(clients), f"{key}.sizes", title="**Client sizes**",
              caption="Training (solid) and test (light) samples of every client, coloured by true cluster.")
        truth = pj.get("truth") or {}
        if truth.get("theta"):
            st.markdown("**True parameters of each cluster** (θ, one row per cluster)")
            st.dataframe([{f"θ{j}": round(v, 3) for j, v in enumerate(row)} | {"cluster": k}
                          for k, row in enumerate(truth["theta"])], hide_index=True)
    rows = data["rows"]
    if rows:
        shown = rows[:IMAGE_ROWS]
        chart(F.image_grid_figure(shown), f"{key}.images", title="**What the clusters see**" + (
            f" · the first {len(shown)} of {len(rows)} clusters" if len(rows) > len(shown) else ""))
    st.caption(data["note"])
