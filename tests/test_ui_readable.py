"""Issue 14's readability fixes that can be checked without a browser: every partition shows something at the
defaults, the chart helper keeps plotly's toolbar off titles and legends, sample-image labels fit their column,
the theme follows the browser's light or dark preference."""
from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

from cfl_core.partition import PARTITIONS
from tests.helpers import process_running, runs, shown, wait_until_ended  # noqa: F401  (runs: the runs-folder fixture)

REPO = Path(__file__).resolve().parent.parent
APP = str(REPO / "app.py")


def partitions_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.query_params.clear()
    return at.switch_page("pages/partitions.py").run()


# every image-capable structure on the bundled digits (linear-mixture needs the synthetic regression source)
ON_DIGITS = [p for p in PARTITIONS if p != "linear-mixture"]


def test_every_partition_on_digits_shows_its_charts_at_the_defaults(runs):
    at = partitions_page()
    assert at.number_input(key="part.samples_per_client").value == 60  # the default the walk-through used
    adjusted = []
    for name in ON_DIGITS:
        at.selectbox(key="part.partition").set_value(name)
        at.run()
        assert not at.exception, (name, [e.value for e in at.exception])
        assert len(at.get("plotly_chart")) == 4, (name, [shown(e.value) for e in at.error])
        notes = [shown(i.value) for i in at.info if "samples per client do not fit" in shown(i.value)]
        if notes:
            adjusted.append(name)
            fitted = int(notes[0].split("shown with **")[1].split("**")[0])
            assert 1 <= fitted < 60
            clients = next(m for m in at.metric if m.label == "Training samples")
            assert int(clients.value.replace(",", "")) == fitted * 20, (name, clients.value)  # 4 clusters x 5
            assert any("samples_per_client=60 is not allowed" in shown(e.value) for e in at.error)  # by the control
    assert adjusted, "no structure needed fewer samples: the test lost its point"


def test_the_offered_largest_value_is_taken_into_the_sidebar(runs):
    at = partitions_page()
    at.selectbox(key="part.partition").set_value("label-skew-4")
    at.run()
    button = at.button(key="part.fit")
    fitted = int(button.label.split()[1])
    button.click()
    at.run()
    assert not at.exception
    assert at.number_input(key="part.samples_per_client").value == fitted
    assert not at.error and not [i for i in at.info if "do not fit" in i.value]
    assert len(at.get("plotly_chart")) == 4


# -- the Playground after its data set changed ---------------------------------------------------------------
def test_an_ended_runs_charts_go_when_the_data_set_changes(runs):
    from cfl_ui.form.session import manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    for name, value in {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 30, "rounds": 2,
                        "local_epochs": 1}.items():
        at.number_input(key=f"pg.{name}").set_value(value)
    at.run()
    at.button(key="pg.run_btn").click()
    at.run()
    ref = at.session_state["pg.run"]
    assert manager().get(ref.split("/")[0]).join(120)
    at.run()
    assert len(at.get("plotly_chart")) >= 5 and not any("Ready." in shown(i.value) for i in at.info)
    at.run()  # redrawn as it is: the run stays on screen
    assert at.session_state["pg.run"] == ref and len(at.get("plotly_chart")) >= 5
    at.selectbox(key="pg.dataset").set_value("synthetic-linear")
    at.selectbox(key="pg.partition").set_value("linear-mixture")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["pg.run"] is None
    assert len(at.get("plotly_chart")) == 0  # no digits chart left; synthetic-linear has no sample images
    assert any("Ready." in shown(i.value) and "synthetic-linear" in shown(i.value) for i in at.info)
    assert (runs / ref).exists()  # the ended run stays saved (Runs page)


# -- the chart helper: plotly's toolbar has a band of its own --------------------------------------------------
def test_the_toolbar_keeps_only_useful_buttons_and_shows_on_hover():
    from cfl_ui.charts.draw import TOOLBAR

    gone = set(TOOLBAR["modeBarButtonsToRemove"])
    assert TOOLBAR["displaylogo"] is False and TOOLBAR["displayModeBar"] == "hover"
    assert {"pan2d", "select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d"} <= gone
    assert not gone & {"toImage", "zoom2d", "resetScale2d"}  # the PNG camera, zoom and reset stay


def test_every_chart_gets_a_toolbar_band_above_its_legend_once():
    import plotly.graph_objects as go

    from cfl_ui.charts import draw as charts
    from cfl_ui.charts import figures as F

    fig = F.figure_from([dict(type="scatter", x=[0, 1], y=[0, 1], name="a")], F.house(300))
    top, height = fig.layout.margin.t, fig.layout.height
    charts.with_toolbar_band(fig)
    charts.with_toolbar_band(fig)  # a figure drawn again (a view cached per round) is not moved twice
    assert fig.layout.margin.t == top + charts.TOOLBAR_BAND and fig.layout.height == height + charts.TOOLBAR_BAND
    # the legend sits on the plot's top edge, so the band above it is free for the toolbar
    assert fig.layout.legend.y >= 1 and fig.layout.legend.yanchor == "bottom"
    bare = go.Figure()
    charts.with_toolbar_band(bare)
    assert bare.layout.margin.t is None  # plotly's own 80-px top margin already has the room
    # the helper's cached path bands the figure it draws
    drawn, prepared = charts._with_spec(F.empty_figure("nothing yet"))
    assert prepared.to_dict()["layout"]["margin"]["t"] == drawn.layout.margin.t
    assert drawn.layout.margin.t >= charts.TOOLBAR_BAND + 20


def test_the_band_counts_a_legends_stacked_groups_and_wrapped_grid():
    from cfl_ui.charts import draw as charts
    from cfl_ui.views import drilldown as D
    from cfl_ui.charts import figures as F
    from tests.test_ui_figures import records

    recs = tuple(records(k_models=4, rounds=5))
    one = [F.Series("CLoVE", recs, "#111")]
    # a run's ARI and NMI curves share a legend group: plotly stacks them, two rows even in a wide chart
    assert charts.legend_rows(F.metric_figure(one, ["ari", "nmi"])) == 2
    assert charts.legend_rows(F.metric_figure(one, ["accuracy"])) == 1
    ari = charts.with_toolbar_band(F.metric_figure(one, ["ari", "nmi"]))
    assert ari.layout.margin.t == 28 + charts.TOOLBAR_BAND + charts.LEGEND_ROW
    # the drill-down's five entries of one width wrap two to a line in a half column at 800 px: three rows
    unit = SimpleNamespace(records=recs)
    drill = D.loss_figure(unit, 0)
    assert len([t for t in drill.data if t.name]) == 5 and drill.layout.legend.entrywidth == D.ENTRY_WIDTH
    assert charts.legend_rows(drill) == 3


def test_replay_buttons_sit_below_the_axis_title_at_every_height():
    from cfl_ui.charts import figures as F
    from cfl_ui.charts.embedding import PCA, loss_embedding
    from tests.test_ui_figures import records

    emb = loss_embedding(records(k_models=4, rounds=5), PCA)
    assert len(emb.frames) > 1
    for height in (380, 430, 470):
        fig = F.embedding_figure(emb, height=height)
        plot_h = height - fig.layout.margin.t - fig.layout.margin.b
        gap = -fig.layout.updatemenus[0].y * plot_h  # px between the plot's bottom edge and the buttons
        assert 55 <= gap <= 75, (height, gap)
        assert fig.layout.sliders[0].y == fig.layout.updatemenus[0].y
        assert fig.layout.margin.b >= gap + 26 + 34 + 30  # buttons, the slider's pad and the slider fit


# -- sample images: captions short enough for an 800-px window -------------------------------------------------
def test_sample_image_captions_are_short_and_name_a_swap():
    from cfl_ui.charts.partition_facts import image_caption, partition_facts

    assert image_caption(3) == "3" and image_caption(3, 3) == "3" and image_caption(3, 5) == "5→3"
    cfg = {"dataset": "digits", "partition": "concept-shift", "clusters": 4, "clients_per_cluster": 2,
           "samples_per_client": 30, "seed": 0}
    facts = partition_facts(cfg)
    captions = [c for _, _, caps in facts["rows"] for c in caps]
    assert captions and max(len(c) for c in captions) <= 4
    assert any("→" in c for c in captions)  # concept shift swaps labels in some cluster
    first = [int(c) for c in facts["rows"][0][2]]  # cluster 0 keeps its labels: every digit, 3 and 8 included
    assert {3, 8} <= set(first)


# -- the theme follows the browser -------------------------------------------------------------------------------
def test_the_theme_has_a_light_and_a_dark_variant_and_a_menu_to_choose():
    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    theme = config["theme"]
    assert "base" not in theme  # a fixed base would ignore the browser's dark preference
    light, dark = theme["light"], theme["dark"]
    for colours in (light, dark):
        assert {"primaryColor", "backgroundColor", "secondaryBackgroundColor", "textColor"} <= set(colours)

    def luminance(hex_colour):
        r, g, b = (int(hex_colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    assert luminance(light["backgroundColor"]) > 0.8 > 0.3 > luminance(dark["backgroundColor"])
    assert luminance(dark["textColor"]) > 0.7 and luminance(light["textColor"]) < 0.3
    assert config["client"]["toolbarMode"] != "minimal"  # "minimal" hides the menu, and with it the theme choice


def test_the_apps_own_css_has_no_fixed_text_colour():
    import re

    from cfl_ui.charts import theme

    for css in (theme.CSS, theme.PRESENT_CSS):
        assert not re.search(r"(?<!-)color:\s*#", css), "a fixed text colour is unreadable in one of the themes"


# -- headline numbers ----------------------------------------------------------------------------------------
def test_the_accuracy_change_says_what_it_is_measured_against():
    def script():
        from types import SimpleNamespace

        from cfl_core.records import RoundRecord
        from cfl_ui.views.run_charts import headline

        def rec(r, acc):
            return RoundRecord(r, "train", [0, 1], [0, 1], None, [acc, acc], [0.1, 0.1], acc, acc, 1.0, 1.0, 2,
                               40_000, 10_000, 0.1, true_clusters=[0, 1])

        headline(SimpleNamespace(records=[rec(0, 0.743), rec(1, 0.748)], config={"partition": "feature-skew"},
                                 meta={}, live=False))

    at = AppTest.from_function(script).run()
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m for m in at.metric}
    assert metrics["Accuracy"].value == "74.8%" and metrics["Accuracy"].delta == "+0.5 pt vs round 0"
    assert "percentage points" in metrics["Accuracy"].help
    assert metrics["kB sent"].value == "100.0"  # 100 kB: never "MB sent 0.1"


def test_pca_of_identical_loss_vectors_has_a_readable_axis_not_1e16():
    from cfl_core.records import RoundRecord
    from cfl_ui.charts.embedding import PCA, loss_embedding

    # after one Step of IFCA from the same model: every client's loss vector alike up to floating-point noise
    row = [2.302585, 2.302585, 2.302585, 2.302585]
    matrix = [[v + 1e-16 * ((c * 7 + j) % 3) for j, v in enumerate(row)] for c in range(6)]
    rec = RoundRecord(0, "train", list(range(6)), [0] * 6, matrix, [0.1] * 6, [2.3] * 6, 0.1, 0.1, 0.0, 0.0, 1,
                      10, 10, 0.1, true_clusters=[0, 0, 0, 1, 1, 1])
    emb = loss_embedding([rec], PCA)
    for lo, hi in emb.ranges:
        assert hi - lo >= 0.05, emb.ranges


# -- UMAP compiled before the first switch -----------------------------------------------------------------------
@pytest.mark.slow  # compiles UMAP's numba code (~20 s on 2 cores)
def test_the_server_warms_umap_up_once_in_a_process_of_its_own():
    import importlib.util
    import os
    import sys

    import numpy as np

    if importlib.util.find_spec("umap") is None:
        pytest.skip("umap-learn is not installed")
    from cfl_ui.charts import embedding as E
    from cfl_ui.jobs import umap_process as U

    thread = E.warm_umap(delay=0)
    assert E.warm_umap(delay=0) is thread and thread.daemon  # once per process, never holding the server up
    thread.join(600)
    assert not thread.is_alive()
    pid, compiled = U.process_facts()
    assert pid != os.getpid() and compiled, "the warm-up compiled none of UMAP's layout code in the layout process"
    # a page's layout runs there too: here, nothing of UMAP is compiled (imported, if at all, by another test)
    points = E._umap_round(None, 0, np.arange(8), np.random.default_rng(0).random((8, 3)), None)
    assert points.shape == (8, 2) and np.isfinite(points).all()
    if "umap.layouts" in sys.modules:
        layouts = sys.modules["umap.layouts"]
        assert not layouts._nb_optimize_layout_euclidean_single_epoch.signatures


@pytest.mark.slow  # compiles UMAP again in the new process (~10 s on 2 cores)
def test_a_killed_layout_process_is_started_again_for_the_next_layout():
    import importlib.util
    import os
    import signal
    import time

    import numpy as np

    if importlib.util.find_spec("umap") is None:
        pytest.skip("umap-learn is not installed")
    from cfl_ui.charts import embedding as E
    from cfl_ui.jobs import umap_process as U

    first, _ = U.process_facts()
    os.kill(first, signal.SIGKILL)  # out of memory, or killed by hand
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            os.kill(first, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{first}/stat") as f:
            if f.read().split()[2] == "Z":
                break
        time.sleep(0.05)
    points = E._umap_round(None, 0, np.arange(8), np.random.default_rng(1).random((8, 3)), None)
    assert points.shape == (8, 2) and np.isfinite(points).all()  # the page's layout came, from a new process
    again, compiled = U.process_facts()
    assert again != first and compiled


# -- in a real browser: a run's page and the client drill-down read well ----------------------------------------
READ_SIZES = [(1366, 768), (800, 900)]


def _browser_readable(page, size, at_least: int) -> None:
    from tools import browser as B

    found = B.readability(page)
    assert found["plots"] >= at_least, (size, found["plots"])
    problems = {k: found[k] for k in ("clipped", "toolbar", "outside", "overlaps") if found[k]}
    assert not problems, (size, problems)


def _resized(page, size) -> None:
    """Until every chart has taken the window's new width (and the sidebar is done collapsing or opening)."""
    from tools import browser as B

    page.set_viewport_size({"width": size[0], "height": size[1]})
    B.settle(page)
    page.wait_for_function("() => { const s = document.querySelector('[data-testid=\"stSidebar\"]');"
                           " const w = s ? s.getBoundingClientRect().width : 0; return w < 1 || w > 200; }",
                           timeout=20000)
    page.wait_for_function("() => Array.from(document.querySelectorAll('.js-plotly-plot')).every(p => "
                           "Math.abs(p.getBoundingClientRect().width - p.parentElement.getBoundingClientRect().width)"
                           " < 3)", timeout=30000)


@pytest.mark.slow
def test_a_run_and_its_client_drilldown_read_well_in_the_browser(tmp_path):
    """One run, then two side by side: their charts (the ARI chart's legend among them) and the drill-down opened
    by a click on a client in the embedding (its "Its loss on every model" chart, in half a window side by side)
    at 1366x768 and 800x900: nothing clipped, no chart text under plotly's toolbar, every point inside its axes,
    no label over another (tools.browser.READABLE_JS)."""
    from tools import browser as B

    if B.chromium_path() is None:
        pytest.fail(B.MISSING_BROWSER.format(path=B.CHROMIUM))
    from playwright.sync_api import sync_playwright

    one = ("clusters=2&clients_per_cluster=3&samples_per_client=40&rounds=4&models=4", "4 of 4 rounds", 5)
    two = ("clusters=4&clients_per_cluster=2&samples_per_client=30&rounds=3&local_epochs=1&models=4"
           "&algorithm=ifca&init=same&vs=clove", "3 of 3 rounds each", 8)
    with B.streamlit_server(tmp_path / "runs", log_path=str(tmp_path / "streamlit.log")) as url, \
            sync_playwright() as p:
        browser = B.launch(p)
        try:
            for query, done, plots in (one, two):
                page = browser.new_page(viewport={"width": READ_SIZES[0][0], "height": READ_SIZES[0][1]})
                page.goto(f"{url}/?{query}")
                B.wait_ready(page)
                B.click_button(page, "Run")
                page.wait_for_function(  # the status line, read again each time (a rerun replaces it)
                    "(done) => Array.from(document.querySelectorAll('[data-testid=\"stMarkdownContainer\"]'))"
                    ".some(e => e.innerText.includes(done) && e.innerText.includes('finished'))", arg=done,
                    timeout=180000)
                page.locator(".js-plotly-plot").nth(plots - 1).wait_for(timeout=60000)
                B.settle(page)
                _browser_readable(page, READ_SIZES[0], plots)  # embeddings, heatmaps, clients per model, curves
                page.locator(".js-plotly-plot .scatterlayer .trace .points path").first.click(force=True)
                page.get_by_text("Its loss on every model, round by round").first.wait_for(timeout=60000)
                drilled = plots + (2 if query is two[0] else 1)  # the loss chart of each run shown
                page.locator(".js-plotly-plot").nth(drilled - 1).wait_for(timeout=60000)
                for size in reversed(READ_SIZES) if query is two[0] else READ_SIZES:
                    _resized(page, size)
                    _browser_readable(page, size, drilled)
                assert page.locator('[data-testid="stException"]').count() == 0
                page.close()
        finally:
            browser.close()


LAYOUT_DRIVER = """
import json, os, time
from cfl_ui.jobs import umap_process as U
pid = U._submit(os.getpid).result(timeout=240)  # starts the layout process, as a server's first layout does
print(json.dumps(pid), flush=True)
time.sleep(600)
"""


def test_a_server_killed_with_sigkill_leaves_no_layout_process_or_fork_server_behind():
    # the layout process's parent is the fork server, which lives while any process it forked holds its
    # "alive" pipe: both waited forever after a killed server until the layout process watched the server itself
    import json
    import os
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-c", LAYOUT_DRIVER], cwd=root, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        layout = json.loads(proc.stdout.readline())
        with open(f"/proc/{layout}/stat") as f:
            fork_server = int(f.read().rsplit(")", 1)[1].split()[1])
        assert fork_server != proc.pid and process_running(layout) and process_running(fork_server)
        os.kill(proc.pid, signal.SIGKILL)  # the server alone
        proc.wait()
        left = wait_until_ended([layout, fork_server])
        assert layout not in left, "the layout process outlived the killed server"
        assert fork_server not in left, "the fork server outlived the killed server"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
