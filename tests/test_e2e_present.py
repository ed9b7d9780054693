"""In front of a room (issue 34), in Debian's chromium: presenter mode draws every chart's parts inside the chart's
own box (legend, axis titles, colour bar, the replay's buttons and slider: the figures are sized, not the page
zoomed), in the light and the dark theme; the Lessons page has its lesson picker in the main area, and a step's
chart, its note and Next are on screen together without scrolling, in presenter mode and in a plain window, at
1366x768, 1024x768, 800x900 and 1920x1080; the pages' menu stays reachable in presenter mode. One server; waits
are for conditions, never fixed sleeps."""
from __future__ import annotations

import pytest

from tools import browser as B
from cfl_ui.views.lessons import LESSONS, missing
from tests.test_e2e_teach import SIDE_BY_SIDE, finished, no_exception, resize

SIZES = [(1366, 768), (1024, 768), (800, 900), (1920, 1080)]
PRESENT_SIZES = [(1366, 768), (1920, 1080)]

# every plotly chart: the parts that must lie inside its own box (.stPlotlyChart), and those that do not
PARTS_JS = r"""
() => Array.from(document.querySelectorAll('.stPlotlyChart')).map(el => {
  const box = el.getBoundingClientRect();
  const kinds = ['legend', 'colorbar', 'updatemenu-container', 'slider-container'];
  // an axis title of any subplot: g-xtitle, g-x2title, ... (a heatmap's rounds are on x2)
  const kind = (p) => kinds.find(k => p.classList.contains(k)) ||
    (Array.from(p.classList).find(c => /^g-[xy][0-9]*title$/.test(c)) || '').replace(/[0-9]/g, '');
  const parts = Array.from(el.querySelectorAll('.legend, .colorbar, .updatemenu-container, .slider-container, '
                                               + 'g[class^="g-x"], g[class^="g-y"]'))
    .map(p => [kind(p), p.getBoundingClientRect()]).filter(([c]) => c)
    .filter(([c, r]) => r.width > 0 && r.height > 0);
  const out = parts.filter(([c, r]) => r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1
                                      || r.bottom > box.bottom + 1)
    .map(([c, r]) => [c, Math.round(r.left - box.left), Math.round(r.top - box.top), Math.round(r.right - box.right),
                      Math.round(r.bottom - box.bottom)]);
  return {kinds: parts.map(([c]) => c), out: out, width: Math.round(box.width), height: Math.round(box.height)};
})
"""


def chart_parts(page) -> list[dict]:
    return page.evaluate(PARTS_JS)


def parts_inside(page, size, at_least: int, kinds: set) -> None:
    """Every chart's legend, axis titles, colour bar and player inside its box; `kinds` were all seen."""
    charts = chart_parts(page)
    assert len(charts) >= at_least, (size, len(charts))
    seen = {k for c in charts for k in c["kinds"]}
    assert kinds <= seen, (size, kinds - seen)
    bad = [(i, c["out"]) for i, c in enumerate(charts) if c["out"]]
    assert not bad, (size, bad)


def on_screen(page, size, locator, what: str) -> dict:
    """The element lies inside the window (no scrolling needed to see it whole)."""
    box = locator.bounding_box()
    assert box is not None, (size, what)
    assert box["y"] >= 0 and box["y"] + box["height"] <= size[1] + 1, (size, what, box)
    assert box["x"] >= 0 and box["x"] + box["width"] <= size[0] + 1, (size, what, box)
    return box


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if B.chromium_path() is None:
        pytest.fail(B.MISSING_BROWSER.format(path=B.CHROMIUM))
    from playwright.sync_api import sync_playwright

    tmp = tmp_path_factory.mktemp("present")
    with B.streamlit_server(tmp / "runs", log_path=str(tmp / "streamlit.log")) as url, sync_playwright() as p:
        browser = B.launch(p)
        try:
            page = open_page(browser, url, SIZES[0])  # a fresh server's first page is the landing page
            page.close()
            yield url, browser
        finally:
            browser.close()


def ready(page) -> None:
    """Until the page is drawn and no script runs (a page may have no sidebar at all: presenter mode's menu is at
    the top, and the Lessons page puts nothing else there)."""
    page.locator('[data-testid="stMainBlockContainer"]').wait_for(timeout=90000)
    page.locator('[data-testid="stMainBlockContainer"] h2').first.wait_for(timeout=90000)  # the page's title
    B.settle(page)


def open_page(browser, url: str, size):
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(url)
    ready(page)
    return page


def dark_page(browser, url: str, size):
    """A page in a browser that asks for the dark theme (the app follows the system's preference)."""
    context = browser.new_context(color_scheme="dark", viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.goto(url)
    ready(page)
    return page


@pytest.mark.slow
def test_presenter_mode_draws_every_charts_parts_inside_its_box(site):
    """Item 2: a side-by-side run (embeddings with their player, heatmaps with colour bars, curves with legends) and
    a lesson's heatmaps, in presenter mode at 1366x768 and 1920x1080; the run's page in the dark theme too."""
    url, browser = site
    page = open_page(browser, f"{url}/?{SIDE_BY_SIDE}&present=1", PRESENT_SIZES[0])
    try:
        assert page.locator('[data-testid="stSidebar"]').first.is_hidden()
        B.click_button(page, "Run")  # the copy under the title: presenter mode has no sidebar
        finished(page, "3 of 3 rounds each")
        page.locator(".js-plotly-plot").nth(7).wait_for(timeout=60000)
        B.settle(page)
        for size in PRESENT_SIZES:
            resize(page, size)
            parts_inside(page, size, 8, {"legend", "g-xtitle", "g-ytitle", "colorbar", "updatemenu-container",
                                         "slider-container"})
            no_exception(page)
        run = page.evaluate("location.search")
    finally:
        page.close()
    page = dark_page(browser, f"{url}/{run}" + ("" if "present=1" in run else "&present=1"), PRESENT_SIZES[0])
    try:
        page.locator(".js-plotly-plot").nth(7).wait_for(timeout=60000)
        B.settle(page)
        assert B.contrast(page)["luminance"] < 0.1  # the dark theme is on
        for size in PRESENT_SIZES:
            resize(page, size)
            parts_inside(page, size, 8, {"legend", "colorbar", "updatemenu-container", "slider-container"})
    finally:
        page.context.close()
    page = open_page(browser, f"{url}/lessons?lesson=collapse&step=3&present=1", PRESENT_SIZES[0])
    try:
        page.get_by_text("step 3 paused at round").first.wait_for(timeout=180000)
        page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60000)
        B.settle(page)
        for size in PRESENT_SIZES:
            resize(page, size)
            parts_inside(page, size, 2, {"colorbar", "g-xtitle"})
    finally:
        page.close()


def lesson_step_on_one_screen(page, size, step: int) -> None:
    """The lesson picker, the step's Next, its chart (the whole of it) and its note inside the window."""
    on_screen(page, size, page.get_by_role("combobox", name="Lesson", exact=True).first, "lesson picker")
    on_screen(page, size, page.get_by_role("button", name="Next", exact=True).first, "Next")
    charts = page.locator(".stPlotlyChart")
    for i in range(charts.count()):  # every chart of the step (two heatmaps side by side, or stacked)
        on_screen(page, size, charts.nth(i), f"the step's chart {i}")
    note = page.locator('[data-testid="stAlertContentSuccess"]').filter(has_text=f"Round ").first
    on_screen(page, size, note, "the step's note")


@pytest.mark.slow
def test_a_lesson_step_its_chart_note_and_next_are_on_one_screen(site):
    """Items 1 and 6: every step of the headline lesson, presenter mode and a plain window, at every size: no
    scrolling between reading the note and pressing Next; the pages' menu is at the top in presenter mode."""
    url, browser = site
    lesson = "collapse"
    for present in (True, False):
        for size in SIZES:
            query = f"lesson={lesson}&step=1" + ("&present=1" if present else "")
            page = open_page(browser, f"{url}/lessons?{query}", size)
            try:
                if present:
                    assert page.locator('[data-testid="stSidebar"]').first.is_hidden()
                    top = page.locator('header').get_by_role("link", name="Playground")
                    assert top.count() >= 1 or page.locator('header').get_by_text("Playground").count() >= 1, size
                for i in range(3):
                    page.get_by_text(f"step {i + 1} paused at round").first.wait_for(timeout=180000)
                    B.settle(page)
                    lesson_step_on_one_screen(page, size, i)
                    no_exception(page)
                    if i < 2:
                        B.click_until(page, "Next", f"Step {i + 2} of 3")
            finally:
                page.close()
    # every lesson, every step, as a presenter walks them (assets/present/walk.py) and in a plain window: the
    # longest step's words and note (the 2-model picture) fit beside the chart too
    for present in (True, False):
        for lesson in [x for x in LESSONS if not missing(x) and x.id != "collapse"]:
            query = f"lesson={lesson.id}&step=1" + ("&present=1" if present else "")
            page = open_page(browser, f"{url}/lessons?{query}", SIZES[0])
            try:
                for i in range(len(lesson.steps)):
                    page.get_by_text(f"step {i + 1} paused at round").first.wait_for(timeout=180000)
                    B.settle(page)
                    lesson_step_on_one_screen(page, SIZES[0], i)
                    if i < len(lesson.steps) - 1:
                        B.click_until(page, "Next", f"Step {i + 2} of {len(lesson.steps)}")
            finally:
                page.close()
    page = dark_page(browser, f"{url}/lessons?lesson=loss-vectors&step=2&present=1", SIZES[0])
    try:
        page.get_by_text("step 2 paused at round").first.wait_for(timeout=180000)
        B.settle(page)
        lesson_step_on_one_screen(page, SIZES[0], 1)
        parts_inside(page, SIZES[0], 1, {"legend", "g-xtitle", "g-ytitle"})
    finally:
        page.context.close()
