"""The conditions' lessons in Debian's chromium (issue 36): "How much privacy noise can clustering take?" and "A new
client arrives" play to their end; at 1366x768, in a plain window and in presenter mode, each step's lesson picker,
Next, its charts (whole) and its note are on screen together, every chart's axis titles and legends inside its box,
and the note on the page is the one computed from the runs. One server; waits are for conditions, never sleeps."""
from __future__ import annotations

import pytest

from tools import browser as B
from cfl_ui.views.lessons import BY_ID
from tests.test_e2e_present import lesson_step_on_one_screen, parts_inside
from tests.test_e2e_teach import no_exception, open_page, site  # noqa: F401  (site: one server, one chromium)

SIZE = (1366, 768)


@pytest.mark.slow
@pytest.mark.parametrize("lesson_id", ["privacy", "unseen"])
@pytest.mark.parametrize("present", [False, True], ids=["plain", "present"])
def test_a_conditions_lesson_plays_each_step_on_one_screen(site, lesson_id, present):
    url, browser = site
    lesson = BY_ID[lesson_id]
    page = open_page(browser, f"{url}/lessons?lesson={lesson_id}&step=1" + ("&present=1" if present else ""), SIZE)
    try:
        for i, step in enumerate(lesson.steps):
            page.get_by_text(f"Step {i + 1} of {len(lesson.steps)}").first.wait_for(timeout=60000)
            page.get_by_text(f"step {i + 1} paused at round").first.wait_for(timeout=180000)
            charts = 1 if step.chart == "privacy" else len(lesson.algorithms)
            page.locator(".js-plotly-plot").nth(charts - 1).wait_for(timeout=60000)
            B.settle(page)
            no_exception(page)
            assert page.locator(".js-plotly-plot").count() == charts
            lesson_step_on_one_screen(page, SIZE, i)
            parts_inside(page, SIZE, charts, {"g-xtitle", "legend"} if step.chart == "privacy" else set())
            note = page.locator('[data-testid="stAlertContentSuccess"]').filter(has_text="Round ").first.inner_text()
            assert "ARI" in note or "(1." in note or "(0." in note, note
            assert ("ε" in note) if lesson_id == "privacy" else ("never trained" in note or "newcomers" in note)
            if i < len(lesson.steps) - 1:
                B.click_until(page, "Next", f"Step {i + 2} of {len(lesson.steps)}")
        assert page.get_by_role("button", name="Next", exact=True).first.is_disabled()
    finally:
        page.close()
