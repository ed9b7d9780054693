"""In a real browser (Debian's chromium via Playwright, never downloaded), one server of its own on a free port:

- dark mode: a browser that prefers a dark colour scheme gets the dark theme; after a small run in the Playground
  and at a lesson's first step, headline numbers, captions and chart texts stand out from what is behind them
  (WCAG contrast 4.5, tools.browser.CONTRAST_JS) and the charts are drawn on a dark paper with light text;
- downloads while a job runs: the Export section's per-round CSV, pressed while the job is still training, arrives
  and holds the rounds done so far (the Playground's, and Compare's with every algorithm's rows).

Waits are for conditions, never fixed sleeps, and generous: the machine may be loaded."""
from __future__ import annotations

import contextlib
import csv
import io
import json
import re

import pytest

from tools import browser as B

SMALL = "clusters=2&clients_per_cluster=3&samples_per_client=40&rounds=4"
# long enough to still be training when the download is pressed; stopped once the file is read
LONG = "clusters=2&clients_per_cluster=3&samples_per_client=40&rounds=3000"

# each plot's paper and text colour as plotly drew them (Streamlit's theme sets the template in the browser)
PLOT_COLOURS_JS = """
() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(p => p._fullLayout).map(p => ({
  paper: p._fullLayout.paper_bgcolor, plot: p._fullLayout.plot_bgcolor, font: p._fullLayout.font.color}))
"""
LUMINANCE_JS = """
(c) => { const d = document.createElement('div'); d.style.color = c; document.body.appendChild(d);
  const m = getComputedStyle(d).color.match(/[\\d.]+/g).map(Number); d.remove();
  const f = (x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); };
  return {lum: 0.2126 * f(m[0]) + 0.7152 * f(m[1]) + 0.0722 * f(m[2]), alpha: m.length > 3 ? m[3] : 1}; }
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if B.chromium_path() is None:
        pytest.fail(B.MISSING_BROWSER.format(path=B.CHROMIUM))
    from playwright.sync_api import sync_playwright

    tmp = tmp_path_factory.mktemp("dark")
    with B.streamlit_server(tmp / "runs", port=B.free_port(), log_path=str(tmp / "streamlit.log"),
                            timeout=180) as url, sync_playwright() as p:
        browser = B.launch(p)
        try:
            yield url, browser
        finally:
            browser.close()


@contextlib.contextmanager
def shown_on_failure(page, path):
    """A screenshot of the page where a step failed (its path in the error)."""
    try:
        yield
    except Exception as e:
        with contextlib.suppress(Exception):
            page.screenshot(path=str(path))
        raise AssertionError(f"{e}\n(screenshot: {path})") from e


def no_exception(page) -> None:
    shown = page.locator('[data-testid="stException"]')
    assert shown.count() == 0, shown.first.inner_text()


def status_line(page, text: str, timeout: float = 300):
    line = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text=text).first
    line.wait_for(timeout=timeout * 1000)
    return line


def drawn(page) -> None:
    """Until no element is faded as stale (Streamlit dims the last run's elements while a rerun draws the page)."""
    page.wait_for_function("() => document.querySelectorAll('[data-stale=\"true\"]').length === 0",
                           timeout=120000)
    B.settle(page, 120)


def dark_and_readable(page, kinds: set[str]) -> dict:
    """The page is on the dark theme, every checked text reads (contrast >= 4.5) and every chart is dark. Read
    again (up to 3 times) when a rerun dimmed the page between the wait and the reading."""
    for _ in range(3):
        drawn(page)
        found = B.contrast(page)
        if not found["poor"]:
            break
    assert found["luminance"] < 0.05, found["background"]  # the dark theme's background, not white
    assert kinds <= set(found["kinds"]), found["kinds"]
    assert not found["poor"], found["poor"]
    plots = page.evaluate(PLOT_COLOURS_JS)
    assert plots
    for colours in plots:
        paper = page.evaluate(LUMINANCE_JS, colours["paper"])
        font = page.evaluate(LUMINANCE_JS, colours["font"])
        # a dark paper (or a transparent one over the dark page) and light text: the dark template
        assert paper["alpha"] < 0.1 or paper["lum"] < 0.05, colours
        assert font["lum"] > 0.5, colours
    return found


@contextlib.contextmanager
def run_started(browser, url: str, query: str, shot, path: str = "", run_label: str = "Run", **context_options):
    """The page `path` (the Playground by default) at `query` in a context of its own with `run_label` pressed; the
    context closed afterwards (a screenshot to `shot` on failure)."""
    context = browser.new_context(**context_options)
    page = context.new_page()
    try:
        with shown_on_failure(page, shot):
            page.goto(f"{url}/{path}?{query}")
            B.wait_ready(page, 180)
            B.click_button(page, run_label)
            yield page
    finally:
        context.close()


@pytest.mark.slow
def test_dark_preference_gives_a_readable_dark_playground_and_lesson(site, tmp_path):
    url, browser = site
    with run_started(browser, url, SMALL, tmp_path / "dark.png", color_scheme="dark",
                     viewport={"width": 1366, "height": 768}) as page:
        status_line(page, "4 of 4 rounds")
        B.wait_finished(page, "4 of 4 rounds", 300)
        page.locator(".js-plotly-plot").nth(3).wait_for(timeout=120000)
        B.settle(page, 120)
        found = dark_and_readable(page, {"metric", "caption", "chart"})
        assert found["kinds"]["chart"] >= 10  # axis titles and tick labels of several charts were read
        no_exception(page)

        page.goto(f"{url}/lessons?lesson=one-model&step=1")
        B.wait_ready(page, 180)
        page.get_by_text("step 1 paused at round").first.wait_for(timeout=300000)
        page.locator(".js-plotly-plot").first.wait_for(timeout=120000)
        B.settle(page, 120)
        dark_and_readable(page, {"caption", "chart"})
        no_exception(page)


def running(page) -> bool:
    return page.get_by_text("running").count() > 0 and page.get_by_text("finished").count() == 0


def export_button(page, name: str):
    """The Export section opened (it is closed until its files are asked for) and the button `name` in it."""
    button = page.get_by_role("button", name=name).first
    for _ in range(3):
        if button.is_visible():
            return button
        page.get_by_text("Export", exact=True).first.click()
        try:
            button.wait_for(timeout=30000)
        except Exception:
            pass
    button.wait_for(timeout=60000)
    return button


@pytest.mark.slow
def test_a_download_pressed_while_the_job_runs_arrives_with_the_rounds_so_far(site, tmp_path):
    url, browser = site
    with run_started(browser, url, LONG, tmp_path / "download.png", accept_downloads=True,
                     viewport={"width": 1366, "height": 900}) as page:
        page.locator('[data-testid="stMetricValue"]').first.wait_for(timeout=300000)  # a round is in
        status_line(page, "of 3000 rounds")
        B.settle(page, 60)
        rows = []
        for ask in ("Make the files of the rounds so far", "Make them again (rounds since)"):
            assert running(page), "the job ended before the download was pressed: make it longer"
            export_button(page, ask).click()
            page.get_by_text(re.compile(r"Rounds 0–\d+, as of")).first.wait_for(timeout=120000)
            B.settle(page, 60)
            # pressed while the job trains and the charts above redraw themselves every second
            assert running(page)
            with page.expect_download(timeout=120000) as info:
                export_button(page, "Per-round metrics (CSV)").click()
            path = info.value.path()  # raises "canceled" if chromium lost the download
            rows.append(list(csv.DictReader(io.StringIO(open(path, encoding="utf-8").read()))))
            with page.expect_download(timeout=120000) as info:
                export_button(page, "Rounds (JSON lines)").click()
            lines = open(info.value.path(), encoding="utf-8").read().splitlines()
            assert lines and [json.loads(x)["round"] for x in lines] == list(range(len(lines)))
        B.click_button(page, "Stop")
        for got in rows:
            assert got, "no records in the file"
            assert [int(r["round"]) for r in got] == list(range(len(got)))  # every round so far, in order
            assert all(0.0 <= float(r["accuracy"]) <= 1.0 for r in got)
            assert len(got) < 3000
        assert len(rows[1]) > len(rows[0])  # made again at the second press: the rounds since are in
        no_exception(page)


@pytest.mark.slow
def test_a_comparisons_csv_pressed_while_it_runs_holds_every_algorithms_rounds_so_far(site, tmp_path):
    url, browser = site
    algos = ["clove", "ifca"]
    with run_started(browser, url, f"algos={','.join(algos)}&{LONG}", tmp_path / "compare.png", path="compare",
                     run_label="Run all", accept_downloads=True, viewport={"width": 1366, "height": 900}) as page:
        status_line(page, "of 3000 rounds")
        page.locator(".js-plotly-plot").first.wait_for(timeout=300000)  # rounds are in
        B.settle(page, 60)
        assert running(page), "the comparison ended before the download was pressed: make it longer"
        export_button(page, "Make the files of the rounds so far").click()
        page.get_by_text(re.compile(r"Rounds 0–\d+, as of")).first.wait_for(timeout=120000)
        B.settle(page, 60)
        assert running(page)
        with page.expect_download(timeout=120000) as info:
            export_button(page, "Per-round metrics (CSV)").click()
        text = open(info.value.path(), encoding="utf-8").read()  # raises "canceled" if chromium lost it
        B.click_button(page, "Stop")
        rows = list(csv.DictReader(io.StringIO(text)))
        for algo in algos:  # every algorithm's rounds so far, each in order from round 0
            got = [int(r["round"]) for r in rows if r["algorithm"] == algo]
            assert got and got == list(range(len(got))) and len(got) < 3000, (algo, got[:5])
        no_exception(page)
