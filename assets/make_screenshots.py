"""Screenshots of the dashboard's pages (for the README), taken in Debian's chromium.

    .venv/bin/python assets/make_screenshots.py [--out assets]

Starts `streamlit run app.py` headless on a free port (runs go to a temporary
folder), runs the signature preset in the Playground, a comparison, the IFCA
initialisation explorer, and opens the Partitions and Runs pages. Prints the
timings it measures on the way (time to interactive, first plot, finish).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cfl_ui import browser as B  # noqa: E402
from cfl_ui.presets import SIGNATURE_PRESET  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as runs, B.streamlit_server(runs, log_path=f"{runs}/../cfl-shots.log") as url:
        with sync_playwright() as p:
            browser = B.launch(p)
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            try:
                shoot(page, url, out, Path(runs))
            except Exception:
                page.screenshot(path=str(out / "failed.png"))
                raise
            browser.close()
    for name in ("playground", "compare", "ifca_initialisation", "partitions", "runs"):
        print(out / f"{name}.png")
    return 0


def shoot(page, url: str, out: Path, runs_root: Path) -> None:
    t = time.time()
    page.goto(url + "/")
    page.get_by_role("button", name="Run", exact=True).wait_for(timeout=90000)
    print(f"playground interactive (cold server): {time.time() - t:.1f} s")
    B.settle(page)
    page.goto(url + "/")
    t = time.time()
    page.get_by_role("button", name="Run", exact=True).wait_for(timeout=90000)
    print(f"playground interactive (warm server): {time.time() - t:.1f} s")
    B.settle(page)

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
    t = time.time()
    B.click_button(page, "Run")
    B.wait_text(page, "20 of 20 rounds each", 180)
    B.settle(page)
    print(f"signature preset (IFCA and CLoVE, 20 rounds each): finished {time.time() - t:.1f} s after Run")
    B.full_screenshot(page, out / "playground.png")

    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(url + "/compare")
    B.wait_ready(page)
    t = time.time()
    B.click_button(page, "Run all")
    B.wait_text(page, "finished", 240)
    B.settle(page)
    print(f"compare (4 algorithms, 20 rounds): finished {time.time() - t:.1f} s after Run")
    B.full_screenshot(page, out / "compare.png")

    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(url + "/ifca-init")
    B.wait_ready(page)
    t = time.time()
    B.click_button(page, "Run")
    B.wait_text(page, "60 of 60 runs done", 600)
    B.settle(page)
    print(f"IFCA initialisation (60 runs x 10 rounds): finished {time.time() - t:.1f} s after Run")
    B.full_screenshot(page, out / "ifca_initialisation.png")

    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(url + "/partitions")
    B.wait_ready(page)
    page.locator(".js-plotly-plot").nth(3).wait_for(timeout=60000)
    B.settle(page)
    B.full_screenshot(page, out / "partitions.png")

    job = next(p.name for p in sorted(runs_root.iterdir()) if "IFCA-vs-CLoVE" in p.name)
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(url + f"/runs?run={job}/clove")
    B.wait_ready(page)
    page.locator(".js-plotly-plot").first.wait_for(timeout=60000)
    B.settle(page)
    B.full_screenshot(page, out / "runs.png")


if __name__ == "__main__":
    raise SystemExit(main())
