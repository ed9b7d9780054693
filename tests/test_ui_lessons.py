"""The Lessons page through AppTest: every lesson plays to its end, its notes are read from the run's records, Back,
Next and a step's link work, and a lesson whose algorithms are missing says so instead of failing."""
from __future__ import annotations

import re
import time

import pytest
from streamlit.testing.v1 import AppTest

from cfl_ui.views.lessons import LESSONS, missing
from tests.lesson_claims import check_lesson
from tests.test_ui_pages import APP, ok, runs  # noqa: F401  (runs: the pages' runs-folder fixture)


def lessons_page(query=None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    ok(at.run())
    at.query_params.clear()
    at.query_params.update(query or {})
    return ok(at.switch_page("pages/lessons.py").run())


def play(at, timeout: float = 180) -> str:
    """Redraw until the step's player pauses at its round; the note shown there."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ok(at.run())
        if at.success:
            return at.success[0].value
        time.sleep(0.1)
    raise AssertionError("the step never reached its round")


def lesson_units(at):
    from cfl_ui.views.lessons_view import _prepared
    from cfl_ui.form.session import manager

    ref = _prepared()[at.session_state["les.lesson"]]
    return manager().snapshot(ref).units


@pytest.mark.parametrize("lesson", [lesson for lesson in LESSONS if not missing(lesson)], ids=lambda x: x.id)
def test_every_lesson_plays_to_its_end(runs, lesson):
    at = lessons_page()
    at.selectbox(key="les.lesson").set_value(lesson.id)
    ok(at.run())
    notes = []
    for i, step in enumerate(lesson.steps):
        notes.append(play(at))
        assert at.markdown and any(f"Step {i + 1} of {len(lesson.steps)}" in m.value for m in at.markdown)
        assert at.query_params["lesson"] == lesson.id and at.query_params["step"] == str(i + 1)
        units = lesson_units(at)
        rnd = step.when(units)
        assert notes[-1] == f"**Round {rnd}.** {step.note(units, rnd)}"
        assert len(at.get("plotly_chart")) >= 1
        if i < len(lesson.steps) - 1:
            at.button(key="les.next").click()
            ok(at.run())
    assert at.button(key="les.next").disabled
    # the notes' numbers are the run's: the last round's ARI of every run appears in the last note
    units = lesson_units(at)
    assert check_lesson(lesson, units) == [n.split(".** ", 1)[1] for n in notes]  # and hold on the page's charts
    for u in units:
        if lesson.steps[-1].note is not None and "ARI" in notes[-1]:
            assert f"{u.records[-1].ari:.2f}" in notes[-1]


def test_collapse_lesson_notes_read_the_records(runs):
    at = lessons_page({"lesson": "collapse", "step": "1"})
    note = play(at)
    ifca = lesson_units(at)[0]
    spread = max(max(row) - min(row) for row in ifca.records[0].loss_matrix)
    assert f"largest difference {spread:.1g}" in note
    assert re.search(r"IFCA sends (\d+) of (\d+) clients to model 0", note)
    at.button(key="les.next").click()
    ok(at.run())
    note = play(at)
    clove = lesson_units(at)[1]
    first = next(r for r in clove.records if r.loss_matrix is not None)
    shown = int(re.match(r"\*\*Round (\d+)", note).group(1))  # the first round whose groups stand apart
    assert shown >= first.round and f"ARI {next(r for r in clove.records if r.round == shown).ari:.2f}" in note
    # Back shows the earlier step at its round at once; a step's link opens it in a new session
    at.button(key="les.back").click()
    ok(at.run())
    assert at.success and at.success[0].value.startswith("**Round 0.**")
    linked = lessons_page({"lesson": "collapse", "step": "3"})
    assert linked.session_state["les.step"] == 2 and play(linked).startswith("**Round")


def test_a_lesson_without_its_algorithms_says_so(runs, monkeypatch):
    from cfl_ui.views import lessons as L

    monkeypatch.setitem(L.BY_ID, "one-model", L.Lesson(
        "one-model", "A lesson", "needs an algorithm this version lacks", ("nosuch", "fedavg"), {},
        L.BY_ID["one-model"].steps, needs=("nosuch",)))
    at = lessons_page({"lesson": "one-model"})
    assert any("needs the algorithms nosuch" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def _chart_spec(at) -> dict:
    import json

    return json.loads(at.get("plotly_chart")[0].proto.spec)


@pytest.mark.parametrize("present", [False, True], ids=["plain", "presenter"])
def test_the_step_its_next_button_and_note_stand_beside_its_chart(runs, present):
    """Issue 34 (items 1 and 6): the lesson picker is in the main area (presenter mode hides the sidebar), and the
    step's words, Next and the note share one column while the chart has the other, so all are on one screen; in
    presenter mode the chart is drawn larger (fonts, markers) yet no taller (a 768-px projector)."""
    at = lessons_page({"lesson": "collapse", "step": "2"})
    if present:
        at.toggle(key="cfl.present").set_value(True)
        ok(at.run())
    note = play(at)
    assert not [w for w in at.sidebar if getattr(w, "key", None) == "les.lesson"]
    words, picture = at.columns[0], at.columns[1]
    assert words.selectbox(key="les.lesson").value == "collapse"
    assert words.button(key="les.next") is not None and words.success[0].value == note
    assert not picture.success and len(picture.get("plotly_chart")) == 1
    spec = _chart_spec(at)
    scale = 1.25 if present else 1.0
    assert spec["layout"]["font"]["size"] == 12 * scale
    assert {t["marker"]["size"] for t in spec["data"] if t.get("customdata")} == {12 * scale}
    assert abs(spec["layout"]["height"] - 470) <= 1  # 440 px and the toolbar's band, in either mode
