"""Screenshots of the dashboard's pages (for the README), taken in Debian's chromium.

    .venv/bin/python assets/make_screenshots.py [--out assets] [--teach]

Starts `streamlit run app.py` headless on a free port (runs go to a temporary
folder), runs the signature preset in the Playground, a comparison, the IFCA
initialisation explorer, and opens the Partitions and Runs pages. Prints the
timings it measures on the way (time to interactive, first plot, finish).
--teach: only the lessons (one screenshot each, lesson-<id>.png) and the narrow
layouts (narrow.png at 800x900, narrow-1024.png at 1024x768 with the side-by-side
embeddings), timing the landing page, a lesson's first annotated chart and the
first PCA -> UMAP switch (as soon as the page can, and again once the server has
warmed UMAP up in the background).
--ifca: only the IFCA initialisation explorer (ifca_initialisation.png).
--narrow: only the two narrow layouts (and the UMAP switch time).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import browser as B  # noqa: E402
from cfl_ui.form.presets import SIGNATURE_PRESET  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent))
    ap.add_argument("--teach", action="store_true", help="only the lessons and the narrow layouts")
    ap.add_argument("--ifca", action="store_true", help="only the IFCA initialisation explorer")
    ap.add_argument("--narrow", action="store_true", help="only the narrow layouts (800x900, 1024x768)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as runs, B.streamlit_server(runs, log_path=f"{runs}/../cfl-shots.log") as url:
        with sync_playwright() as p:
            browser = B.launch(p)
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            try:
                (shoot_teach if args.teach else shoot_ifca if args.ifca else shoot_narrow if args.narrow else shoot)(page, url, out, Path(runs))
            except Exception:
                page.screenshot(path=str(out / "failed.png"))
                raise
            browser.close()
    return 0


def shoot_teach(page, url: str, out: Path, runs_root: Path) -> None:
    """Every lesson paused at its last step, and the Playground after a run at 800x900."""
    from cfl_ui.views.lessons import LESSONS, missing

    page.set_viewport_size({"width": 1366, "height": 768})
    interactive(page, url, "landing page")
    for lesson in LESSONS:
        if missing(lesson):
            print(f"lesson {lesson.id}: skipped ({', '.join(missing(lesson))} not installed)")
            continue
        page.set_viewport_size({"width": 1366, "height": 768})
        t = time.time()
        page.goto(url + f"/lessons?lesson={lesson.id}&step=1")
        page.get_by_text("step 1 paused at round").first.wait_for(timeout=180000)
        page.locator(".js-plotly-plot").first.wait_for(timeout=60000)
        print(f"lesson {lesson.id}: first annotated chart {time.time() - t:.1f} s after opening (run prepared now)")
        for i in range(1, len(lesson.steps)):
            B.settle(page)
            B.click_until(page, "Next", f"Step {i + 1} of {len(lesson.steps)}")
            page.get_by_text(f"step {i + 1} paused at round").first.wait_for(timeout=180000)
        page.locator(".js-plotly-plot").first.wait_for(timeout=60000)
        B.settle(page)
        B.full_screenshot(page, out / f"lesson-{lesson.id}.png", width=1366)
        print(out / f"lesson-{lesson.id}.png")
    shoot_narrow(page, url, out, runs_root)


def shoot_narrow(page, url: str, out: Path, runs_root: Path) -> None:
    """The Playground after a run at 800x900, and the signature preset at 1024x768 (its embeddings)."""
    page.set_viewport_size({"width": 800, "height": 900})
    page.goto(url + "/")
    B.wait_ready(page)
    B.click_button(page, "Run")
    B.wait_text(page, "20 of 20 rounds", 180)
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60000)
    B.settle(page)
    page.screenshot(path=str(out / "narrow.png"))
    print(out / "narrow.png")

    # 1024x768: the signature preset side by side, scrolled to the two embeddings (stacked at this width)
    page.set_viewport_size({"width": 1024, "height": 768})
    B.open_sidebar(page)  # collapsed in a narrow window: opened for the preset, closed for the picture
    B.choose(page, "Preset", SIGNATURE_PRESET)
    B.settle(page)
    B.close_sidebar(page)
    B.click_button(page, "Run")  # the run controls under the title
    B.wait_text(page, "20 of 20 rounds each", 240)
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60000)
    B.settle(page)
    umap_switch(page, "right after the run")
    page.get_by_text("PCA", exact=True).first.click()
    page.get_by_text("PCA fitted once").first.wait_for(timeout=60000)
    B.settle(page)
    page.get_by_text("How IFCA sees the clients").first.evaluate("e => e.scrollIntoView({block: 'start'})")
    B.settle(page)
    page.screenshot(path=str(out / "narrow-1024.png"))
    print(out / "narrow-1024.png")


def umap_switch(page, when: str) -> None:
    """Time the PCA -> UMAP switch: from the click to the UMAP layout drawn (and whether a spinner showed)."""
    t = time.time()
    page.get_by_text("UMAP", exact=True).first.click()
    spinner = None
    try:
        page.locator('[data-testid="stSpinner"]').first.wait_for(timeout=8000)
        spinner = time.time() - t
    except Exception:
        pass
    page.get_by_text("UMAP per round").first.wait_for(timeout=300000)
    B.settle(page)
    print(f"PCA -> UMAP switch ({when}): {time.time() - t:.1f} s"
          + (f", spinner shown {spinner:.1f} s after the click" if spinner is not None else ", no spinner seen"))


def interactive(page, url: str, what: str) -> None:
    """Time the landing page until its Run button shows: on the server's first view, and again."""
    for when in ("cold server", "warm server"):
        t = time.time()
        page.goto(url + "/")
        page.get_by_role("button", name="Run", exact=True).first.wait_for(timeout=90000)
        print(f"{what} interactive ({when}): {time.time() - t:.1f} s")
        B.settle(page)


def open_at(page, url: str, plots: int = 0, width: int = 1600, height: int = 1000) -> None:
    """Open a page in a window of this size and wait until it is drawn (and its first `plots` charts are)."""
    page.set_viewport_size({"width": width, "height": height})
    page.goto(url)
    B.wait_ready(page)
    if plots:
        page.locator(".js-plotly-plot").nth(plots - 1).wait_for(timeout=60000)
    B.settle(page)


def run_timed(page, button: str, done: str, what: str, timeout: float = 240) -> None:
    """Press a run button, wait for `done` to show and the page to settle, and print how long it took."""
    t = time.time()
    B.click_button(page, button)
    B.wait_text(page, done, timeout)
    B.settle(page)
    print(f"{what}: finished {time.time() - t:.1f} s after {button}")


def shot(page, out: Path, name: str) -> None:
    B.full_screenshot(page, out / f"{name}.png")
    print(out / f"{name}.png")


def ifca_sweep(page, url: str, out: Path) -> None:
    """The IFCA initialisation explorer's default 60 runs, timed, and its screenshot."""
    open_at(page, url + "/ifca-init")
    run_timed(page, "Run", "60 of 60 runs done", "IFCA initialisation (60 runs x 10 rounds)", 600)
    shot(page, out, "ifca_initialisation")


def shoot_ifca(page, url: str, out: Path, runs_root: Path) -> None:
    open_at(page, url + "/")  # a fresh server's first view straight at /ifca-init shows "Page not found" over it
    ifca_sweep(page, url, out)


def shoot(page, url: str, out: Path, runs_root: Path) -> None:
    interactive(page, url, "playground")

    # the default preset: first plot and finish
    t = time.time()
    B.click_button(page, "Run")
    page.get_by_text("Who trains which model").first.wait_for(timeout=60000)
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60000)
    print(f"default preset: first plot {time.time() - t:.1f} s after Run")
    B.wait_text(page, "20 of 20 rounds")
    print(f"default preset: finished {time.time() - t:.1f} s after Run")

    # the signature preset, side by side
    B.choose(page, "Preset", SIGNATURE_PRESET)
    B.settle(page)
    run_timed(page, "Run", "20 of 20 rounds each", "signature preset (IFCA and CLoVE, 20 rounds each)", 180)
    shot(page, out, "playground")

    open_at(page, url + "/compare")
    run_timed(page, "Run all", "finished", "compare (4 algorithms, 20 rounds)")
    shot(page, out, "compare")

    ifca_sweep(page, url, out)

    open_at(page, url + "/partitions", plots=4)
    shot(page, out, "partitions")

    job = next(p.name for p in sorted(runs_root.iterdir()) if "IFCA-vs-CLoVE" in p.name)
    open_at(page, url + f"/runs?run={job}/clove", plots=1)
    shot(page, out, "runs")


if __name__ == "__main__":
    raise SystemExit(main())
