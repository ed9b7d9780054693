"""Presenter mode enlarges a chart by sizing its figure (cfl_ui.charts.scale), not by zooming the page (issue 34):
every pixel length times the factor, every paper position as it was, the figure it came from untouched."""
from __future__ import annotations

import copy

from cfl_ui.charts import draw
from cfl_ui.charts import figures as F
from cfl_ui.charts.embedding import PCA, loss_embedding
from cfl_ui.charts.scale import scaled_spec
from tests.test_ui_figures import records
from tests.test_ui_pages import runs  # noqa: F401  (the pages' runs-folder fixture)

S = 1.25


def replay_figure():
    return F.embedding_figure(loss_embedding(records(k_models=4, clusters=4, rounds=5), PCA))


def test_every_pixel_length_grows_and_every_paper_position_stays():
    fig = replay_figure()
    spec = fig.to_dict()
    before = copy.deepcopy(spec)
    big = scaled_spec(spec, S)
    assert spec == before  # a new dict: a figure shared by every session is never changed for one of them
    lay, was = big["layout"], spec["layout"]
    assert lay["height"] == round(was["height"] * S) and lay["font"]["size"] == 12 * S
    assert lay["margin"] == {k: v * S for k, v in was["margin"].items()}
    assert lay["legend"]["font"]["size"] == was["legend"]["font"]["size"] * S
    assert lay["legend"]["tracegroupgap"] == was["legend"]["tracegroupgap"] * S
    # the replay's player: its pads in pixels grow, its place (paper fractions derived from pixels) does not
    menu, slider = lay["updatemenus"][0], lay["sliders"][0]
    assert (menu["x"], menu["y"], slider["y"], slider["len"]) == (
        was["updatemenus"][0]["x"], was["updatemenus"][0]["y"], was["sliders"][0]["y"], was["sliders"][0]["len"])
    assert slider["pad"]["t"] == was["sliders"][0]["pad"]["t"] * S
    assert lay["annotations"][0]["font"]["size"] == was["annotations"][0]["font"]["size"] * S
    assert lay["annotations"][0]["y"] == was["annotations"][0]["y"]
    points = [t for t in big["data"] if t.get("customdata")]
    assert points and all(t["marker"]["size"] == 12 * S and t["marker"]["line"]["width"] == S for t in points)
    # the axes' ranges are data: kept
    assert lay["xaxis"]["range"] == was["xaxis"]["range"]
    # every animation frame's points too, or ▶ would shrink them back
    assert spec["frames"] and all(t["marker"]["size"] == 12 * S for f in big["frames"] for t in f["data"])
    assert scaled_spec(spec, 1) is spec


def test_a_heatmaps_colour_bar_and_a_drawn_figure_grow():
    heat = F.assignment_heatmap(records(k_models=2, clusters=2, per=3))
    spec = heat.to_dict()
    big = scaled_spec(spec, S)
    bars = [(t.get("colorbar", {}).get("thickness", 30), b["colorbar"]["thickness"])
            for t, b in zip(spec["data"], big["data"]) if t.get("showscale", True)]
    assert bars and all(b == a * S for a, b in bars)  # its own thickness, or plotly's default (30 px)
    # draw.sized: a new figure, the toolbar's band (the toolbar keeps its size) added once after sizing
    fig = F.metric_figure([F.Series("a", tuple(records()), "#1f77b4")], ["accuracy"], height=300)
    drawn = draw.with_toolbar_band(draw.sized(fig, S))
    assert drawn is not fig and fig.layout.height == 300
    assert drawn.layout.height == round(300 * S) + draw.TOOLBAR_BAND
    assert drawn.layout.margin.t == fig.layout.margin.t * S + draw.TOOLBAR_BAND
    assert draw.sized(fig, 1) is fig


def test_partitions_has_its_preset_picker_under_the_title_where_the_sidebar_is_hidden(runs):
    """Presenter mode hides the sidebar: the Partitions page's preset picker has a copy in the main area (shown
    there by the same CSS as the training pages' run controls), and choosing in it fills the page's controls."""
    from cfl_ui.charts.theme import CSS, PICKERS_MAIN, PRESENT_CSS
    from tests.test_ui_pages import app, ok

    assert f".st-key-{PICKERS_MAIN} {{display: none;}}" in CSS
    assert f".st-key-{PICKERS_MAIN} {{display: flex !important;}}" in PRESENT_CSS
    at = ok(app("pages/partitions.py", {"present": "1"}))
    at.selectbox(key="part.main.preset").set_value("Label swaps (concept shift)")
    ok(at.run())
    assert at.selectbox(key="part.partition").value == "concept-shift"
    assert at.selectbox(key="part.preset").value == "Label swaps (concept shift)"
