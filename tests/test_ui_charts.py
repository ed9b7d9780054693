"""The chart helper: figures built once per cache key, drawn with the toolbar config, title and caption; and no
chart anywhere that does not go through it."""
from __future__ import annotations

import json
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from cfl_ui.charts import draw as charts

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


def test_cached_keeps_at_most_its_bytes_and_always_the_newest_entry(monkeypatch):
    """Export files and replays are large: the cache is bounded by their bytes as well as by their count."""
    import plotly.graph_objects as go

    monkeypatch.setattr(charts, "_CACHE", type(charts._CACHE)())
    monkeypatch.setattr(charts, "CACHE_BYTES", 1000)
    built = []

    def text(name, size):
        return lambda: built.append(name) or "x" * size

    charts.cached(("a",), text("a", 400))
    charts.cached(("b",), text("b", 400))
    charts.cached(("a",), text("a", 400))  # a hit; a is now the newer of the two
    charts.cached(("c",), text("c", 400))  # 1200 bytes: the oldest (b) goes
    assert list(charts._CACHE) == [("a",), ("c",)]
    charts.cached(("huge",), text("huge", 5000))  # over the bound alone: kept, every older entry goes
    assert list(charts._CACHE) == [("huge",)]
    charts.cached(("huge",), text("huge", 5000))
    assert built == ["a", "b", "c", "huge"]

    figure = go.Figure(go.Scatter(x=list(range(100)), y=list(range(100))))
    prepared = charts.Prepared(figure)
    assert charts.weight((figure, prepared)) == 4 * len(prepared._spec.json_text) > 400
    assert charts.weight(b"abc") == 3 and charts.weight(["ab", ("c", 7)]) == 3 and charts.weight(None) == 0


def test_cached_keeps_an_empty_result():
    built = []
    key = ("empty-result", id(built))
    assert charts.cached(key, lambda: built.append(1) or []) == []
    assert charts.cached(key, lambda: built.append(1) or []) == []
    assert built == [1]


def test_sessions_asking_for_a_key_being_built_wait_for_that_build_instead_of_building_it_again(monkeypatch):
    """A job's end reruns every watching session at once: one of them builds each new figure, the rest wait."""
    import threading
    import time

    monkeypatch.setattr(charts, "_CACHE", type(charts._CACHE)())
    builds, results = [], []
    release = threading.Event()

    def build():
        builds.append(threading.get_ident())
        release.wait(5)
        return ["the figure"]

    sessions = [threading.Thread(target=lambda: results.append(charts.cached(("replay",), build)))
                for _ in range(5)]
    for t in sessions:
        t.start()
    time.sleep(0.3)  # every session has asked by now; one builds, four wait
    assert len(builds) == 1 and not results
    release.set()
    for t in sessions:
        t.join(5)
    assert len(builds) == 1 and len(results) == 5 and all(r is results[0] for r in results)
    assert not charts._BUILDING  # nothing left marked as being built


def test_a_failed_build_is_built_again_by_a_waiting_session(monkeypatch):
    import threading
    import time

    monkeypatch.setattr(charts, "_CACHE", type(charts._CACHE)())
    calls, results, errors = [], [], []
    started = threading.Event()

    def build():
        calls.append(1)
        if len(calls) == 1:
            started.set()
            time.sleep(0.3)
            raise ValueError("bad data")
        return "built"

    def session():
        try:
            results.append(charts.cached(("flaky",), build))
        except ValueError as e:
            errors.append(str(e))

    first = threading.Thread(target=session)
    first.start()
    started.wait(5)
    second = threading.Thread(target=session)
    second.start()
    first.join(5)
    second.join(5)
    assert errors == ["bad data"] and results == ["built"] and len(calls) == 2
    assert not charts._BUILDING


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
    # the same folder run again (`run --out X --overwrite`) with as many rounds is another run: nothing reused
    Unit.meta = {"started_at": "2026-12-03T00:06:01+0000"}
    again = charts.unit_key(Unit)
    Unit.meta = {"started_at": "2026-12-03T00:09:12+0000"}
    assert charts.unit_key(Unit) != again


def chart_script():
    import plotly.graph_objects as go
    import streamlit as st

    from cfl_ui.charts.draw import chart

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


def test_a_cached_chart_is_copied_and_encoded_once_and_sends_exactly_plotlys_json(monkeypatch):
    """Live refreshes of every session redraw the same cached figure: st.plotly_chart gets its dict and JSON made
    the first time (copying and encoding each figure per session per second took most of a loaded server's time)."""
    import plotly.io as pio
    from plotly.basedatatypes import BaseFigure

    copies = []
    real = BaseFigure.to_dict
    monkeypatch.setattr(BaseFigure, "to_dict", lambda self: copies.append(1) or real(self))
    at = AppTest.from_function(chart_script, default_timeout=30).run()
    assert not at.exception
    first = len(copies)
    at.run()
    at.run()
    assert len(copies) - first == 2  # only the uncached "plain" chart, once per rerun
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    import plotly.graph_objects as go

    expected = charts._PLOTLY_TO_JSON(go.Figure(go.Scatter(x=[0, 1], y=[1, 0])).to_dict(), validate=False)
    assert spec == json.loads(expected) and spec["data"][0]["x"] == [0, 1]
    assert pio.to_json({"data": []}, validate=False) == charts._PLOTLY_TO_JSON({"data": []}, validate=False)


def shared_chart_script():
    import plotly.graph_objects as go
    import streamlit as st

    from cfl_ui.charts.draw import cached, chart

    # an algorithm's view: one figure object built once for every session and rerun (cfl_ui.views.run_charts'
    # unit_extra_views), drawn without a cache key of its own
    view = cached(("test-view", st.session_state.setdefault("view_id", str(id(st.session_state)))),
                  lambda: go.Figure(go.Scatter(x=[0, 1, 2], y=[2, 0, 1])))
    chart(view, "view", shared=True)


def test_a_shared_figure_is_copied_and_encoded_once_for_every_rerun_and_sends_exactly_plotlys_json(monkeypatch):
    """An algorithm's views are built once per round count for every session; each session's every redraw copied
    and encoded them again (about half of another session's poll, benchmarks/live_redraw.py)."""
    import plotly.graph_objects as go
    from plotly.basedatatypes import BaseFigure

    copies = []
    real = BaseFigure.to_dict
    monkeypatch.setattr(BaseFigure, "to_dict", lambda self: copies.append(1) or real(self))
    at = AppTest.from_function(shared_chart_script, default_timeout=30).run()
    assert not at.exception
    assert len(copies) == 1
    at.run()
    at.run()
    assert len(copies) == 1  # not per rerun
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    with_band = charts.with_toolbar_band(go.Figure(go.Scatter(x=[0, 1, 2], y=[2, 0, 1])))
    assert spec == json.loads(charts._PLOTLY_TO_JSON(with_band.to_dict(), validate=False))


def test_every_chart_of_every_page_goes_through_the_chart_helper():
    sources = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "cfl_ui").rglob("*.py"))]
    direct = [str(p.relative_to(ROOT)) for p in sources
              if p.relative_to(ROOT).as_posix() != "cfl_ui/charts/draw.py"
              and re.search(r"\.plotly_chart\(", p.read_text())]
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


def test_sessions_polling_a_running_unit_draw_the_same_round_count_within_an_interval():
    """However many sessions watch a job making rounds faster than they poll, its figures are built at most once per
    interval: every session's poll in that interval draws the count first seen in it (charts cached per count)."""
    import dataclasses

    from cfl_ui.views.live_view import steady
    from cfl_ui.jobs.snapshots import UnitSnapshot

    class Rec(int):
        round = property(int)

    def unit(n):
        return UnitSnapshot(ref="job-frames-test", name="", label="x", tags={}, config={}, status="running",
                            records=tuple(map(Rec, range(n))), total_rounds=100, summary=None, meta={}, error=None,
                            traceback=None, folder="/f")

    assert steady(unit(3), now=100.0).records == (0, 1, 2)
    later = [steady(unit(n), now=100.0 + t) for n, t in ((4, 0.2), (6, 0.5), (7, 0.99))]
    assert [u.rounds_done for u in later] == [3, 3, 3]  # three sessions, one picture
    assert len({charts.unit_key(u) for u in later}) == 1
    assert steady(unit(8), now=101.0).rounds_done == 8  # the next interval draws what there is
    assert steady(unit(2), now=101.1).rounds_done == 2  # never more than the unit holds (a restarted job)
    other = dataclasses.replace(unit(9), ref="job-frames-other")
    assert steady(other, now=101.2).rounds_done == 9  # each unit has its own


def _rerun_folder_app():
    """The embedding of a run folder as the Runs page draws it; st.session_state["variant"] picks which of two runs
    (the same reference, folder and round count, started at different times) the folder holds now."""
    import dataclasses

    import streamlit as st

    from cfl_ui.views import run_charts as R
    from cfl_ui.jobs.snapshots import FINISHED, UnitSnapshot
    from tests.test_ui_figures import records

    variant = st.session_state.get("variant", 0)
    recs = records(k_models=2)
    if variant:  # the second run's losses differ
        recs = [dataclasses.replace(r, loss_matrix=[[2 * v for v in row] for row in r.loss_matrix]) for r in recs]
    unit = UnitSnapshot(ref=st.session_state["ref"], name="", label="x", tags={}, config={"algorithm": "clove"},
                        status=FINISHED, records=tuple(recs), total_rounds=len(recs), summary={}, error=None,
                        meta={"started_at": f"2026-12-03T00:0{variant}:00+0000", "has_loss_vectors": True},
                        traceback=None, folder="/runs/again")
    R.embedding_block(unit, "runs", "pca")


def test_a_folder_run_again_with_as_many_rounds_shows_the_new_runs_embedding_not_the_cached_one():
    import uuid

    ref = f"again-{uuid.uuid4().hex}"
    specs = []
    for variant in (0, 1, 0):
        at = AppTest.from_function(_rerun_folder_app, default_timeout=60)
        at.session_state["ref"], at.session_state["variant"] = ref, variant
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        specs.append(json.loads(at.get("plotly_chart")[0].proto.spec))
    assert specs[0]["layout"]["xaxis"]["range"] != specs[1]["layout"]["xaxis"]["range"]  # the new run's losses
    assert specs[2] == specs[0]
