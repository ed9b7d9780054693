"""How long a fresh dashboard server's first page takes to be interactive in chromium.

    python benchmarks/page_start.py [--loads 5] [--server serve,streamlit,floor] [--json FILE]

Per load: a fresh server (`python -m cfl_ui.serve`, what `make run` starts, or plain
`streamlit run app.py`; `floor`: plain `streamlit run` of a page holding only the dashboard's page
settings, a title and a Run button in the sidebar: what Streamlit itself costs this browser and
machine, the floor under any page) on a free port, started and waited for until its health endpoint answers;
then a fresh chromium context opens the landing page (app.py: the Playground). Interactive = the
app's script has finished its first run (Streamlit's `data-test-script-state` is no longer
`running`/`initial`) with the Playground's Run button drawn and enabled. The figure is the browser's
own clock (performance.now(), from the start of the navigation), read when that condition first
holds (polled at every animation frame); the server's start-up before it listens is reported apart.
Chromium is started once, before the first load, and not counted. With --second-view a second page
view on the same server (a second visitor) is timed too (note: cfl_ui.charts.embedding starts compiling UMAP 20 s
after the server starts, so on a busy machine a second view may meet that compilation). Median and range over --loads fresh servers; the machine's
load average is printed before and after each load. A benchmark script, never a test.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.browser import launch, streamlit_server  # noqa: E402

# the Run button is drawn once the sidebar's controls are; the script state says the run has ended
READY_JS = r"""() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app) return false;
  const state = app.getAttribute('data-test-script-state');
  if (state === 'running' || state === 'initial' || state === null) return false;
  const buttons = [...document.querySelectorAll('button')];
  // the button's text is its icon's name, then its label ("play_arrow\n\nRun")
  const run = buttons.find(b => /(^|\s)Run$/.test(b.innerText.trim()) && !b.disabled && b.offsetParent !== null);
  return run ? performance.now() : false;
}"""


def page_view(browser, url: str, timeout: float) -> float:
    """Seconds from the start of navigation to interactive, by the page's clock (a fresh context: no cache)."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    try:
        page = context.new_page()
        page.goto(url, wait_until="commit", timeout=timeout * 1000)
        handle = page.wait_for_function(READY_JS, polling="raf", timeout=timeout * 1000)
        return float(handle.json_value()) / 1000
    finally:
        context.close()


# the floor: Streamlit's own cost for a page with the dashboard's settings and a Run button, nothing else
FLOOR_APP = """import streamlit as st
st.set_page_config(page_title="floor", layout="wide", initial_sidebar_state="expanded")
st.sidebar.button("Run")
st.title("Playground")
"""


def one_load(browser, kind: str, timeout: float, second_view: bool) -> dict:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as runs:
        app = None
        if kind == "floor":
            app = Path(runs) / "floor_app.py"
            app.write_text(FLOOR_APP)
        began = time.perf_counter()
        with streamlit_server(runs, preload=(kind == "serve"), timeout=timeout, app=app) as url:
            listening = time.perf_counter() - began
            first = page_view(browser, url, timeout)
            second = page_view(browser, url, timeout) if second_view else None
    return {"server": kind, "listening_s": listening, "first_page_s": first, "second_page_s": second,
            "load_before": load_before, "load_after": os.getloadavg()}


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loads", type=int, default=5, help="fresh servers per kind (default 5)")
    ap.add_argument("--server", default="serve", help="serve (make run), streamlit (plain streamlit run), floor "
                                                      "(a bare Streamlit page with a Run button), comma-separated")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--second-view", action="store_true", help="also time a second page view on each server")
    ap.add_argument("--json", metavar="FILE", help="write every load as JSON")
    o = ap.parse_args(argv)
    kinds = [k.strip() for k in o.server.split(",") if k.strip()]
    if not kinds or any(k not in ("serve", "streamlit", "floor") for k in kinds) or o.loads < 1:
        ap.error("--server takes serve, streamlit and/or floor; --loads at least 1")
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            for i in range(o.loads):
                for kind in kinds:  # alternated, so a change in the machine's load hits both alike
                    row = one_load(browser, kind, o.timeout, o.second_view)
                    rows.append(row)
                    print(f"{kind:9} load {i + 1}: listening after {row['listening_s']:.2f} s, first page "
                          f"interactive {row['first_page_s']:.2f} s"
                          + (f", second view {row['second_page_s']:.2f} s" if o.second_view else "") + "; "
                          f"load average {row['load_before'][0]:.2f} -> {row['load_after'][0]:.2f}", flush=True)
        finally:
            browser.close()
    for kind in kinds:
        mine = [r for r in rows if r["server"] == kind]
        second = f"; second view {summary([r['second_page_s'] for r in mine])}" if o.second_view else ""
        print(f"{kind}: first page {summary([r['first_page_s'] for r in mine])}{second}; server listening after "
              f"{summary([r['listening_s'] for r in mine])}")
    if o.json:
        Path(o.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
