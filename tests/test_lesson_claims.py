"""Every lesson's notes say what its charts show (the rules: tests/lesson_claims.py), checked on the lessons' own
runs trained here, and the checks themselves catch a note that does not hold."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from cfl_core.experiment import Experiment
from cfl_ui.views import lessons as L
from cfl_ui.charts.figures import assignment_heatmap
from tests.lesson_claims import check_lesson, values

RUNS: dict = {}


def lesson_units(lesson) -> list:
    """The lesson's runs (its configs, identical clients and initial models), trained once per test session."""
    if lesson.id not in RUNS:
        RUNS[lesson.id] = [SimpleNamespace(records=tuple(Experiment(cfg)), live=False, label=cfg.algorithm,
                                           ref=f"{lesson.id}/{cfg.algorithm}", meta={}, algorithm=cfg.algorithm)
                           for cfg in L.configs(lesson)]
    return RUNS[lesson.id]


@pytest.mark.parametrize("lesson", [x for x in L.LESSONS if not L.missing(x)], ids=lambda x: x.id)
def test_every_lesson_note_holds_on_its_chart(lesson):
    notes = check_lesson(lesson, lesson_units(lesson))
    assert len(notes) == len(lesson.steps)


def test_the_collapse_lesson_counts_groups_seen_apart():
    """CLoVE's step waits for a round where its groups stand apart on the PCA axes, and says how many."""
    lesson = L.BY_ID["collapse"]
    units = lesson_units(lesson)
    rnd = L.clove_groups_apart(units)
    assigned, apart = L.groups_seen(units[1], rnd)
    assert assigned == apart == 4 and f"form {apart} groups" in L.clove_groups(units, rnd)
    # over the whole run's axes (the chart as it was drawn before) two of the four groups lie on top of each other
    from cfl_ui.charts.embedding import PCA, loss_embedding
    whole = loss_embedding(units[1].records, PCA)
    frame = next(f for f in whole.frames if f.round == rnd)
    assert L.visible_groups(frame.points, frame.models, whole.ranges[:2]) < 4


def test_a_note_that_claims_too_much_is_caught():
    """The checks fail a note whose count or distance is not what the chart shows."""
    lesson = L.BY_ID["collapse"]
    units = lesson_units(lesson)
    step = lesson.steps[1]
    wrong = L.Lesson(lesson.id, lesson.title, lesson.summary, lesson.algorithms, lesson.config, (
        lesson.steps[0], L.Step(step.title, step.text, step.when,
                                lambda u, r: L.clove_groups(u, r).replace("form 4 groups", "form 5 groups"),
                                step.chart, step.unit), lesson.steps[2]))
    with pytest.raises(AssertionError, match="counts 5 groups"):
        check_lesson(wrong, units)
    same_round = L.Lesson(lesson.id, lesson.title, lesson.summary, lesson.algorithms, lesson.config, (
        lesson.steps[0], L.Step(step.title, step.text, L.first_round, L.ifca_tie, step.chart, 0)))
    with pytest.raises(AssertionError, match="stays at round 0"):
        check_lesson(same_round, units)


def test_heatmap_rows_keep_the_first_steps_order():
    """When clients change: the last step's rows are in round 0's order, the strip shows then and now."""
    lesson = L.BY_ID["clients-change"]
    units = lesson_units(lesson)
    def rows(fig):
        return values(fig.to_dict()["data"][0]["customdata"])[:, 0].astype(int).tolist()

    first = rows(assignment_heatmap(units[1].records[:1]))
    end = assignment_heatmap(units[1].records, order_by=units[1].records[0])
    assert rows(end) == first and list(end.to_dict()["data"][0]["x"]) == ["r0", "now"]
    assert rows(assignment_heatmap(units[1].records)) != first  # the live view groups by today's clusters


def test_the_conditions_lessons_notes_are_checked_against_their_charts():
    """A privacy note quoting an epsilon or an ARI not drawn, or an unseen-clients note with another chart's
    accuracy, is caught."""
    for lesson_id, swap in (("privacy", lambda n: n.replace("CLoVE ε 1,510", "CLoVE ε 1,511")),
                            ("privacy", lambda n: n.replace("-0.13", "-0.31")),
                            ("unseen", lambda n: n.replace("CLoVE 97%", "CLoVE 12%"))):
        lesson = L.BY_ID[lesson_id]
        units = lesson_units(lesson)
        last = lesson.steps[-1]
        changed = swap(last.note(units, last.when(units)))
        assert changed != last.note(units, last.when(units)), "the example note moved: update the test's swap"
        wrong = L.Lesson(lesson.id, lesson.title, lesson.summary, lesson.algorithms, lesson.config, (
            lesson.steps[0], L.Step(last.title, last.text, last.when, lambda u, r, c=changed: c, last.chart)),
            variants=lesson.variants)
        with pytest.raises(AssertionError, match="not drawn|against the chart"):
            check_lesson(wrong, units)
