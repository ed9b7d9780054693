"""A presenter's walk through every lesson (issue 34): presenter mode at 1366x768 in Debian's chromium.

    .venv/bin/python assets/present/walk.py [--out DIR]

Starts the dashboard headless (runs in a temporary folder), opens each lesson in presenter mode (?present=1) and
plays it step by step as a teacher would: waits for the step to pause at its round, checks that the step's chart,
its note and Next are on screen without scrolling, saves a screenshot (<lesson>-<step>.png; the last step of each
lesson in this folder as <lesson>.png) and presses Next. Prints, per step, the seconds from opening the lesson (or
pressing Next) to the paused step, and the machine's 1-minute load.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tools import browser as B  # noqa: E402

SIZE = (1366, 768)


def inside(page, locator) -> bool:
    box = locator.bounding_box()
    return bool(box) and box["y"] >= 0 and box["y"] + box["height"] <= SIZE[1] + 1


def main() -> int:
    from playwright.sync_api import sync_playwright

    from cfl_ui.views.lessons import LESSONS, missing

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "cfl-walk"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as runs, B.streamlit_server(runs) as url, sync_playwright() as p:
        browser = B.launch(p)
        page = browser.new_page(viewport={"width": SIZE[0], "height": SIZE[1]})
        page.goto(url + "/")
        B.wait_ready(page)
        for lesson in LESSONS:
            if missing(lesson):
                print(f"{lesson.id}: not installed here ({', '.join(missing(lesson))})")
                continue
            began = time.time()
            page.goto(f"{url}/lessons?lesson={lesson.id}&step=1&present=1")
            for i, step in enumerate(lesson.steps):
                page.get_by_text(f"step {i + 1} paused at round").first.wait_for(timeout=300000)
                B.settle(page)
                seconds = time.time() - began
                note = page.locator('[data-testid="stAlertContentSuccess"]').first
                charts = page.locator(".stPlotlyChart")
                seen = {"charts": all(inside(page, charts.nth(c)) for c in range(charts.count())),
                        "note": inside(page, note),
                        "Next": inside(page, page.get_by_role("button", name="Next", exact=True).first)}
                page.screenshot(path=str(out / f"{lesson.id}-{i + 1}.png"))
                if i == len(lesson.steps) - 1:
                    page.screenshot(path=str(HERE / f"{lesson.id}.png"))
                print(f"{lesson.id} step {i + 1} ({step.title}): {seconds:.1f} s to its pause; on screen "
                      f"{seen}; load {os.getloadavg()[0]:.1f}", flush=True)
                if i < len(lesson.steps) - 1:
                    began = time.time()
                    B.click_until(page, "Next", f"Step {i + 2} of {len(lesson.steps)}")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
