"""A teacher's path in a real browser (Debian's chromium via Playwright, never downloaded), one server for all:
the run controls are on screen without scrolling and the headline numbers are whole at 1366x768, 1024x768 and
800x900; at each size the pages read well (no clipped number or label, no text under plotly's toolbar, every point
inside its axes, no caption over another: tools.browser.READABLE_JS); a click on a client in the embedding opens
its drill-down, every lesson plays to its end, and Compare's per-round CSV holds every algorithm's rows. Waits are
for conditions, never fixed sleeps."""
from __future__ import annotations

import contextlib
import csv
import io
import re

import pytest

from tools import browser as B
from cfl_ui.views.lessons import LESSONS, missing
from cfl_ui.charts.theme import NARROW_PX

SIZES = [(1366, 768), (1024, 768), (800, 900)]
SMALL = "clusters=2&clients_per_cluster=3&samples_per_client=40&rounds=4"
# side by side with 4 models: PCA embeddings with their replay, heatmaps, wrapped legends
SIDE_BY_SIDE = ("clusters=4&clients_per_cluster=2&samples_per_client=30&rounds=3&local_epochs=1&models=4"
                "&algorithm=ifca&init=same&vs=clove")


# every headline metric's number and delta: [testid, text, whether an element of it is wider than its box]
METRIC_PARTS_JS = """
() => Array.from(document.querySelectorAll('[data-testid="stMetricValue"], [data-testid="stMetricDelta"]')).map(e =>
  [e.getAttribute('data-testid'), e.innerText.trim(),
   [e, ...e.querySelectorAll('*')].some(n => n.clientWidth > 0 && n.scrollWidth > n.clientWidth + 1)])
"""


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
    B.wait_finished(page, text, timeout)


def sidebar_collapsed(page, want: bool) -> None:
    """Until the sidebar is collapsed (narrow windows, cfl_ui.charts.theme.SIDEBAR_JS) or open, and done moving."""
    page.wait_for_function(
        "(want) => { const s = document.querySelector('[data-testid=\"stSidebar\"]');"
        " if (!s || (s.getAttribute('data-collapsed') === 'true') !== want) return false;"
        " const w = s.getBoundingClientRect().width; return want ? w < 1 : w > 200; }", arg=want, timeout=20000)


def resize(page, size) -> None:
    """Until every chart has taken its new width (plotly follows the window on its resize event), and the sidebar
    has collapsed where a window gets narrow."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    if size[0] <= NARROW_PX:
        sidebar_collapsed(page, True)
    B.settle(page)
    page.wait_for_function("() => Array.from(document.querySelectorAll('.js-plotly-plot')).every(p => "
                           "Math.abs(p.getBoundingClientRect().width - p.parentElement.getBoundingClientRect().width)"
                           " < 3)", timeout=30000)


def readable(page, size, at_least: int, points: int = 0) -> None:
    found = B.readability(page)
    assert found["plots"] >= at_least, (size, found["plots"])
    assert found["points"] >= points, (size, found["points"])  # that many scatter markers were checked
    problems = {k: found[k] for k in ("clipped", "toolbar", "outside", "overlaps") if found[k]}
    assert not problems, (size, problems)


def read_at(page, charts: int, sizes=SIZES, points: int = 0) -> None:
    """At each size in turn: the window resized, the page read (READABLE_JS), no exception shown."""
    for size in sizes:
        resize(page, size)
        readable(page, size, charts, points)
        no_exception(page)


@contextlib.contextmanager
def ran(browser, url: str, button: str, done: str):
    """A page opened at 1366x768 at `url`, its run button pressed and the job finished (`done` in the status
    line); closed after."""
    page = open_page(browser, url, SIZES[0])
    try:
        B.click_button(page, button)
        finished(page, done)
        yield page
    finally:
        page.close()


@pytest.mark.slow
def test_pages_read_well_at_every_size(site):
    url, browser = site
    with ran(browser, f"{url}/?{SIDE_BY_SIDE}", "Run", "3 of 3 rounds each") as page:
        page.locator(".js-plotly-plot").nth(7).wait_for(timeout=60000)
        # 2 embeddings, 2 heatmaps, 2 areas, accuracy, ARI; both embeddings' clients checked
        read_at(page, 8, points=16)
        resize(page, SIZES[0])
        page.get_by_text("UMAP", exact=True).first.click()  # a spinner while it lays the rounds out
        page.get_by_text("UMAP per round").first.wait_for(timeout=240000)
        page.get_by_text("UMAP can draw structure that is not there").first.wait_for()  # its caption warns
        read_at(page, 8)
    for path, charts in (("/partitions?partition=concept-shift", 4), ("/lessons?lesson=one-model&step=1", 1)):
        page = open_page(browser, url + path, SIZES[-1])
        try:
            if "lessons" in path:
                page.get_by_text("step 1 paused at round").first.wait_for(timeout=180000)
            page.locator(".js-plotly-plot").nth(charts - 1).wait_for(timeout=120000)
            read_at(page, charts, sizes=list(reversed(SIZES)))
        finally:
            page.close()


@pytest.mark.slow
def test_run_controls_headline_numbers_and_drilldown_at_every_size(site):
    url, browser = site
    run_link = None
    for size in SIZES:
        page = open_page(browser, url + ("/?" + SMALL if run_link is None else run_link), size)
        try:
            sidebar_collapsed(page, size[0] <= NARROW_PX)  # narrow: collapsed, its run controls under the title
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
            B.settle(page)
            # the numbers and their deltas ("+0.3 pt vs round 2"), read at one moment: whole, neither ending in
            # "…" nor cut off
            parts = page.evaluate(METRIC_PARTS_JS)
            assert parts, size
            for part, text, clipped in parts:
                assert text and "…" not in text and not clipped, (size, part, text)
            deltas = sum(part == "stMetricDelta" for part, _, _ in parts)
            assert deltas >= 1, size  # the accuracy's change since the round before was read too
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
    with ran(browser, f"{url}/compare?algos={','.join(algos)}&{SMALL}", "Run all", "4 of 4 rounds each") as page:
        button = page.get_by_role("button", name="Per-round metrics (CSV)").first
        button.wait_for(timeout=60000)
        with page.expect_download() as info:
            button.click()
        text = open(info.value.path(), encoding="utf-8").read()
        rows = list(csv.DictReader(io.StringIO(text)))
        assert {a: sum(1 for r in rows if r["algorithm"] == a) for a in algos} == {a: 4 for a in algos}
        assert "\r" not in text.splitlines()[0]
        no_exception(page)


def dismiss_page_not_found(page) -> None:
    """A fresh server can show "Page not found" over a page with a hyphenated url_path on a direct visit
    (streamlit#9992); the page itself is drawn under it."""
    dialog = page.get_by_role("dialog").filter(has_text="Page not found")
    if dialog.count():
        page.keyboard.press("Escape")
        dialog.wait_for(state="detached", timeout=10000)


@pytest.mark.slow
def test_compare_ifca_runs_and_sweeps_read_well_at_every_size(site):
    url, browser = site
    with ran(browser, f"{url}/?{SIDE_BY_SIDE}", "Run", "3 of 3 rounds each") as page:  # for the Runs page
        page.wait_for_function("() => location.search.includes('run=')")
        run = page.evaluate("new URLSearchParams(location.search).get('run')")
    with ran(browser, f"{url}/compare?algos=clove,ifca,fedavg&{SMALL}", "Run all", "4 of 4 rounds each") as page:
        page.locator(".js-plotly-plot").nth(3).wait_for(timeout=60000)
        read_at(page, 4)
    page = open_page(browser, url + "/", SIZES[0])  # IFCA initialisation: reached from the landing page
    try:
        page.goto(f"{url}/ifca-init?seeds=1&rounds=3")
        B.wait_ready(page)
        dismiss_page_not_found(page)
        page.get_by_text("IFCA initialisation").first.wait_for()
        read_at(page, 0)  # before Run: the form and its estimate
        resize(page, SIZES[0])
        B.open_sidebar(page)
        B.click_button(page, "Run")
        B.wait_text(page, "6 of 6 runs done", 300)
        B.settle(page)
        read_at(page, 0)
        caption = page.get_by_text("Sweep folder:").first.inner_text()
        sweep = re.search(r"sweeps/ifca-init-[0-9a-f]+", caption).group(0)
    finally:
        page.close()
    # Runs: the Playground run above reopened; Sweeps: the IFCA page's sweep and its heatmap (each page is another
    # browser here: a link shows another browser's run or sweep)
    for path, charts, text in ((f"/runs?run={run}", 3, "Open in Playground"), (f"/sweeps?sweep={sweep}", 1,
                                                                                "ifca-init-")):
        page = open_page(browser, url + path, SIZES[0])
        try:
            page.get_by_text(text).first.wait_for(timeout=60000)
            page.locator(".js-plotly-plot").nth(charts - 1).wait_for(timeout=60000)
            B.settle(page)
            read_at(page, charts)
        finally:
            page.close()


def test_closed_sidebar_sections_open_on_a_click_and_keep_their_values(site):
    """"More settings" and "Link to this page" draw their content only once opened (lighter fresh pages): a click
    opens them, a value set there survives closing and reopening, and the link comes with its copy button."""
    url, browser = site
    page = open_page(browser, url, (1366, 768))
    try:
        bar = page.locator('[data-testid="stSidebar"]')
        batch = bar.get_by_role("spinbutton", name="Batch size", exact=True)
        assert batch.count() == 0 and bar.locator('[data-testid="stCode"]').count() == 0
        more = bar.locator("summary").filter(has_text="More settings")
        more.click()
        batch.wait_for(timeout=30000)
        batch.fill("20")
        batch.press("Enter")
        B.settle(page)
        more.click()  # closed: the widget is gone ...
        batch.wait_for(state="detached", timeout=30000)
        B.settle(page)
        more.click()  # ... and back with the value set before
        batch.wait_for(timeout=30000)
        assert batch.input_value() == "20"
        bar.locator("summary").filter(has_text="Link to this page").click()
        code = bar.locator('[data-testid="stCode"]')
        code.wait_for(timeout=30000)
        assert "batch_size=20" in code.inner_text()
        no_exception(page)
    finally:
        page.close()


TRAINING_PAGES = (("", ("Run", "Step", "Pause", "Stop")), ("compare", ("Run all", "Pause", "Stop")),
                  ("ifca-init", ("Run", "Stop")))


def on_screen(page, size, name: str, role: str = "button") -> None:
    """The first visible element of that role and name lies inside the window, without scrolling."""
    box = page.get_by_role(role, name=name, exact=True).first.bounding_box()
    assert box and box["y"] >= 0 and box["y"] + box["height"] <= size[1], (size, name, box)
    assert box["x"] >= 0 and box["x"] + box["width"] <= size[0], (size, name, box)


@pytest.mark.slow
def test_every_training_page_shows_its_run_controls_and_presets_in_presenter_mode_and_its_sidebar(site):
    """cfl_ui.form.frame: in presenter mode (no sidebar) the run controls and the preset picker are under the title
    at any width; otherwise at the top of the sidebar (the IFCA page's too, no longer under twenty controls)."""
    url, browser = site
    for size in ((1366, 768), (1920, 1080)):
        for path, names in TRAINING_PAGES:
            page = open_page(browser, f"{url}/{path}?present=1", size)
            try:
                for name in names:
                    on_screen(page, size, name)
                on_screen(page, size, "Preset", role="combobox")
                assert page.locator('[data-testid="stSidebar"]').first.is_hidden()  # presenter mode has none
                no_exception(page)
            finally:
                page.close()
    size = SIZES[0]
    for path, names in TRAINING_PAGES:
        page = open_page(browser, f"{url}/{path}", size)
        try:
            sidebar = page.locator('[data-testid="stSidebar"]')
            for name in names:
                box = sidebar.get_by_role("button", name=name, exact=True).first.bounding_box()
                assert box and box["y"] + box["height"] <= size[1], (path, name, box)
                assert page.locator('[data-testid="stMain"]').get_by_role("button", name=name, exact=True).count() == 0
        finally:
            page.close()
