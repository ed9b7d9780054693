"""The clients before any training, drawn: the Partitions page's numbers and charts, and the Playground's preview
of the clusters.

The partition's facts (cfl_ui.charts.partition_facts) are built once per setting of the
fields that define the clients and shared by both.
"""
from __future__ import annotations

import base64
import html
import io

import numpy as np
import streamlit as st

from ..charts import partition_figures as PF
from ..charts.draw import cached, chart
from ..charts.palette import cluster_color
from ..charts.partition_facts import PARTITION_KEYS, partition_facts


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


def _png(img: np.ndarray) -> str:
    """One image [C, H, W] in [0, 1] as a PNG data URI, about PREVIEW_PX pixels a side: dark strokes on white for
    one channel (as the Partitions page's plotly grid draws them), colour as it is for three."""
    from PIL import Image

    img = np.clip(np.asarray(img, dtype=float), 0, 1)
    if img.shape[0] == 3:
        picture = Image.fromarray((img.transpose(1, 2, 0) * 255).astype(np.uint8), "RGB")
    else:
        picture = Image.fromarray(((1 - img[0]) * 255).astype(np.uint8), "L")
    side = max(1, PREVIEW_PX // max(picture.size)) * max(picture.size)  # whole pixels, scaled up here: the
    picture = picture.resize((side, side), Image.NEAREST)  # page's CSS sizes an image by its own pixels
    buf = io.BytesIO()
    picture.save(buf, "PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


PREVIEW_PX = 40  # the largest side of a sample image on the page (its pixels scaled up, square and sharp)


def image_grid_html(rows) -> str:
    """Rows of small images as one block of HTML: the row's title beside a bar of its cluster's colour (text in a
    cluster's colour read 1.6-4.6:1 on the light or dark page, under 4.5), each image with its
    caption (the label, "5→3" for a swapped one) under it; the images of a row shrink to fit a narrow column.

    The Playground's preview, drawn on every fresh page: as a plotly chart it was a grid of 40 subplots, and
    chromium spent about half its time opening the Playground loading plotly.js and drawing it (7,354 DOM nodes,
    4.6 MB more script; benchmarks/page_weight.py, SERVER_LOAD.md)."""
    out = ['<div class="cfl-preview" style="display:flex;flex-direction:column;gap:6px">']
    for i, (title, imgs, caps) in enumerate(rows):
        cells = "".join(
            f'<figure style="margin:0;flex:1 1 0;min-width:14px;max-width:{PREVIEW_PX}px;text-align:center">'
            f'<img src="{_png(img)}" alt="{html.escape(str(cap))}" style="width:100%;height:auto;'
            f'aspect-ratio:1;image-rendering:pixelated;display:block;max-width:none">'
            f'<figcaption style="font-size:0.72rem;opacity:0.72;line-height:1.3;white-space:nowrap">'
            f"{html.escape(str(cap))}</figcaption></figure>" for img, cap in zip(imgs, caps))
        out.append('<div style="display:flex;align-items:flex-start;gap:4px">'
                   f'<div style="width:76px;box-sizing:border-box;flex:none;font-weight:600;font-size:0.78rem;'
                   f'margin-top:4px;padding:4px 0 4px 6px;border-left:4px solid {cluster_color(i)}">'
                   f'{html.escape(str(title))}</div>{cells}</div>')
    out.append("</div>")
    return "".join(out)


def preview(values: dict, key: str) -> bool:
    """Sample images of the clusters about to be trained (before any run); False when there are none."""
    try:
        data = facts(values)
    except Exception:  # the form is being edited into a setting that cannot be built: no preview
        return False
    if not data["rows"]:
        return False
    # made once per setting for every session (every fresh Playground draws it)
    with st.container(key=f"cfl-preview-{key}".replace(".", "-")):
        st.html(cached(("preview", repr(setting(values))), lambda: image_grid_html(data["rows"][:4])))
    st.caption(data["note"])
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
            chart(PF.cluster_class_heatmap(clients, data["num_classes"]), f"{key}.cc", title="**Classes per cluster**",
                  caption="Training samples of each class (as the clients see their labels) in each true cluster: "
                          "label skew shows as different columns per row, concept shift as swapped columns.")
        with c2:
            chart(PF.client_sizes_figure(clients), f"{key}.sizes", title="**Client sizes**",
                  caption="Training (solid) and test (light) samples of every client, coloured by true cluster: "
                          "quantity skew makes these bars uneven.")
        chart(PF.client_labels_figure(clients, data["num_classes"]), f"{key}.labels", title="**Each client's labels**",
              caption="One bar per client, stacked by class, clients grouped by true cluster (coloured strip): a "
                      "Dirichlet or pathological split makes clients of one cluster differ from each other too.")
    else:
        chart(PF.client_sizes_figure(clients), f"{key}.sizes", title="**Client sizes**",
              caption="Training (solid) and test (light) samples of every client, coloured by true cluster.")
        truth = pj.get("truth") or {}
        if truth.get("theta"):
            st.markdown("**True parameters of each cluster** (θ, one row per cluster)")
            st.dataframe([{f"θ{j}": round(v, 3) for j, v in enumerate(row)} | {"cluster": k}
                          for k, row in enumerate(truth["theta"])], hide_index=True)
    rows = data["rows"]
    if rows:
        shown = rows[:IMAGE_ROWS]
        chart(PF.image_grid_figure(shown), f"{key}.images", title="**What the clusters see**" + (
            f" · the first {len(shown)} of {len(rows)} clusters" if len(rows) > len(shown) else ""))
    st.caption(data["note"])
