"""The chart helper: figures built once per cache key, drawn with the toolbar config, title and caption; and no
chart anywhere that does not go through it."""
from __future__ import annotations

import json
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from cfl_ui import charts

ROOT = Path(__file__).resolve().parent.parent


def test_cached_builds_once_per_key_and_keeps_the_most_recent(monkeypatch):
    monkeypatch.setattr(charts, "_CACHE", type(charts._CACHE)())
    monkeypatch.setattr(charts, "CACHE_SIZE", 2)
    built = []

    def build(name):
        return lambda: built.append(name) or f"figure {name}"

    assert charts.cached(("a",), build("a")) == "figure a"
    assert charts.cached(("a",), build("a again")) == "figure a"  # a hit: not rebuilt
    charts.cached(("b",), build("b"))
    charts.cached(("a",), build("a"))  # a is now the most recent
    charts.cached(("c",), build("c"))  # over the size: b, the oldest, goes
    charts.cached(("b",), build("b"))
    assert built == ["a", "b", "c", "b"]


def test_cached_keeps_an_empty_result():
    built = []
    key = ("empty-result", id(built))
    assert charts.cached(key, lambda: built.append(1) or []) == []
    assert charts.cached(key, lambda: built.append(1) or []) == []
    assert built == [1]


def test_unit_key_changes_with_each_new_round():
    class Rec:
        def __init__(self, r):
            self.round = r

    class Unit:
        ref, folder = "job/u", "/runs/job/u"
        records = (Rec(0), Rec(1))

    key = charts.unit_key(Unit)
    Unit.records = (*Unit.records, Rec(2))
    assert charts.unit_key(Unit) != key and charts.unit_key(Unit)[2] == 3


def chart_script():
    import plotly.graph_objects as go
    import streamlit as st

    from cfl_ui.charts import chart

    def build():
        st.session_state["builds"] = st.session_state.get("builds", 0) + 1
        return go.Figure(go.Scatter(x=[0, 1], y=[1, 0]))

    key = ("test-chart", st.session_state.setdefault("cache_id", str(id(st.session_state))))
    chart(build, "first", cache=key, title="**A title**", caption="What the chart shows.")
    chart(build, "second", cache=key)
    chart(go.Figure(), "plain")


def test_chart_draws_title_figure_and_caption_with_the_toolbar_config_and_reuses_the_cached_figure():
    at = AppTest.from_function(chart_script, default_timeout=30).run()
    assert not at.exception
    assert at.session_state["builds"] == 1  # the second chart with the same key reused the first's figure
    at.run()
    assert at.session_state["builds"] == 1  # and a rerun (a live refresh) too
    plots = at.get("plotly_chart")
    assert len(plots) == 3
    for plot in plots:
        assert json.loads(plot.proto.config) == charts.TOOLBAR and charts.TOOLBAR["displaylogo"] is False
    assert [m.value for m in at.markdown] == ["**A title**"]
    assert [c.value for c in at.caption] == ["What the chart shows."]
    # the title above its chart, the caption right below it
    assert [e.type for e in at.main.children.values()] == ["markdown", "plotly_chart", "caption", "plotly_chart",
                                                           "plotly_chart"]


def test_every_chart_of_every_page_goes_through_the_chart_helper():
    sources = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "cfl_ui").glob("*.py"))]
    direct = [str(p.relative_to(ROOT)) for p in sources
              if p.name != "charts.py" and re.search(r"\.plotly_chart\(", p.read_text())]
    assert direct == []


def test_a_pages_charts_carry_the_toolbar_config_and_their_captions(tmp_path, monkeypatch):
    monkeypatch.setenv("CFL_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("CFL_UI_WARMUP", "0")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
    at = at.switch_page("pages/partitions.py").run()
    assert not at.exception, [e.value for e in at.exception]
    plots = at.get("plotly_chart")
    assert len(plots) == 4 and all(json.loads(p.proto.config) == charts.TOOLBAR for p in plots)
    kinds = [e.type for e in in_order(at.main) if e.type in ("plotly_chart", "caption")]
    assert kinds == ["plotly_chart", "caption"] * 4  # each chart with its explanation below it


def in_order(node):
    """Every element under a block (columns included), in the order the page shows them."""
    for child in getattr(node, "children", {}).values():
        if getattr(child, "children", None) is not None:
            yield from in_order(child)
        else:
            yield child
