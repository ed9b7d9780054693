"""A teacher's path in a real browser (Debian's chromium via Playwright, never downloaded), one server for all:
the run controls are on screen without scrolling and the headline numbers are whole at 1366x768 and 800x900, a
click on a client in the embedding opens its drill-down, every lesson plays to its end, and Compare's per-round CSV
holds every algorithm's rows. Waits are for conditions, never fixed sleeps."""
from __future__ import annotations

import csv
import io
import re

import pytest

from cfl_ui import browser as B
from cfl_ui.lessons import LESSONS, missing

SIZES = [(1366, 768), (800, 900)]
SMALL = "clusters=2&clients_per_cluster=3&samples_per_client=40&rounds=4"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if B.chromium_path() is None:
        pytest.fail(B.MISSING_BROWSER.format(path=B.CHROMIUM))
    from playwright.sync_api import sync_playwright

    tmp = tmp_path_factory.mktemp("teach")
    with B.streamlit_server(tmp / "runs", log_path=str(tmp / "streamlit.log")) as url, sync_playwright() as p:
        browser = B.launch(p)
        try:
            yield url, browser
        finally:
            browser.close()


def no_exception(page) -> None:
    shown = page.locator('[data-testid="stException"]')
    assert shown.count() == 0, shown.first.inner_text()


def open_page(browser, url: str, size) -> object:
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(url)
    B.wait_ready(page)
    return page


def finished(page, text: str, timeout: float = 180) -> None:
    """Until the status line holds `text` and says finished."""
    status = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text=text).first
    status.wait_for(timeout=timeout * 1000)
    page.wait_for_function("(el) => el.innerText.includes('finished')", arg=status.element_handle(),
                           timeout=timeout * 1000)


@pytest.mark.slow
def test_run_controls_headline_numbers_and_drilldown_at_two_sizes(site):
    url, browser = site
    run_link = None
    for size in SIZES:
        page = open_page(browser, url + ("/?" + SMALL if run_link is None else run_link), size)
        try:
            for name in ("Run", "Step", "Pause", "Stop"):
                box = page.get_by_role("button", name=name, exact=True).first.bounding_box()
                assert box and box["y"] >= 0 and box["y"] + box["height"] <= size[1], (size, name, box)
            if run_link is None:
                B.click_button(page, "Run")
                finished(page, "4 of 4 rounds")
                page.wait_for_function("() => location.search.includes('run=')")
                run_link = "/" + page.evaluate("location.search")
            else:
                finished(page, "4 of 4 rounds")
            page.locator('[data-testid="stMetricValue"]').first.wait_for()
            for metric in page.locator('[data-testid="stMetric"]').all():
                value = metric.locator('[data-testid="stMetricValue"]')
                text = value.inner_text().strip()
                clipped = value.evaluate("e => [e, ...e.querySelectorAll('*')].some("
                                         "n => n.scrollWidth > n.clientWidth + 1)")
                assert text and "…" not in text and not clipped, (size, text)
            no_exception(page)
            if size == SIZES[0]:
                # a click on a client's point in the embedding opens its drill-down
                point = page.locator(".js-plotly-plot .scatterlayer .trace .points path").first
                point.wait_for()
                point.click(force=True)
                story = page.locator('[data-testid="stMarkdownContainer"]').filter(
                    has_text=re.compile(r"client \d+ \(true cluster \d+\) · moved \d+ time")).first
                story.wait_for(timeout=60000)
                page.get_by_text("Its loss on every model, round by round").first.wait_for(timeout=60000)
                no_exception(page)
        finally:
            page.close()


@pytest.mark.slow
@pytest.mark.parametrize("lesson", [x for x in LESSONS if not missing(x)], ids=lambda x: x.id)
def test_every_lesson_plays_to_its_end(site, lesson):
    url, browser = site
    page = open_page(browser, f"{url}/lessons?lesson={lesson.id}&step=1", SIZES[0])
    try:
        for i in range(len(lesson.steps)):
            page.get_by_text(f"Step {i + 1} of {len(lesson.steps)}").first.wait_for(timeout=60000)
            page.get_by_text(f"step {i + 1} paused at round").first.wait_for(timeout=180000)
            page.locator(".js-plotly-plot").first.wait_for(timeout=60000)  # the annotated chart
            no_exception(page)
            if i < len(lesson.steps) - 1:
                B.settle(page)
                B.click_until(page, "Next", f"Step {i + 2} of {len(lesson.steps)}")
        assert page.get_by_role("button", name="Next", exact=True).first.is_disabled()
    finally:
        page.close()


@pytest.mark.slow
def test_compare_csv_holds_every_algorithms_rows(site, tmp_path):
    url, browser = site
    algos = ["clove", "ifca", "fedavg"]
    page = open_page(browser, f"{url}/compare?algos={','.join(algos)}&{SMALL}", SIZES[0])
    try:
        B.click_button(page, "Run all")
        finished(page, "4 of 4 rounds each")
        button = page.get_by_role("button", name="Per-round metrics (CSV)").first
        button.wait_for(timeout=60000)
        with page.expect_download() as info:
            button.click()
        text = open(info.value.path(), encoding="utf-8").read()
        rows = list(csv.DictReader(io.StringIO(text)))
        assert {a: sum(1 for r in rows if r["algorithm"] == a) for a in algos} == {a: 4 for a in algos}
        assert "\r" not in text.splitlines()[0]
        no_exception(page)
    finally:
        page.close()
