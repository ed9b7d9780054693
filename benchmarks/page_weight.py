"""Where a browser's time goes when it opens a dashboard page, with nobody else watching.

    python benchmarks/page_weight.py [--page /] [--loads 3]

Starts the dashboard headless on a fresh runs folder and opens `--page` `--loads` times, each in a fresh chromium
context (Debian's chromium through Playwright). For each load it prints: seconds until the document loaded, the
websocket's first message, the Run button drawn and the page settled (Streamlit's running indicator gone);
what the page holds then (DOM nodes, Streamlit elements, buttons, widgets, plotly charts); what came over the
websocket (messages, kB) and over HTTP (scripts: count, kB); and chromium's own counters for the load (CDP
Performance metrics: seconds spent running scripts, in layout and in style recalculation, and in all tasks).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.server_load import Wire  # noqa: E402
from tools import browser as B  # noqa: E402

COUNTS_JS = """() => ({
  nodes: document.getElementsByTagName('*').length,
  elements: document.querySelectorAll('[data-testid="stElementContainer"]').length,
  buttons: document.querySelectorAll('button').length,
  widgets: document.querySelectorAll('[data-testid="stWidgetLabel"]').length,
  plotly: document.querySelectorAll('.js-plotly-plot').length,
  images: document.querySelectorAll('img').length,
  scripts_kb: Math.round(performance.getEntriesByType('resource').filter(r => r.initiatorType === 'script' ||
      r.name.endsWith('.js')).reduce((s, r) => s + (r.encodedBodySize || r.transferSize || 0), 0) / 1024),
  scripts: performance.getEntriesByType('resource').filter(r => r.name.endsWith('.js')).length,
})"""


def load(browser, url: str) -> dict:
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    out: dict = {}
    try:
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Performance.enable")
        started = time.perf_counter()
        wire = Wire(page, started)
        page.goto(url, wait_until="domcontentloaded", timeout=120000)
        out["document"] = time.perf_counter() - started
        page.get_by_role("button", name="Run", exact=True).first.wait_for(timeout=120000)
        out["run_button"] = time.perf_counter() - started
        B.settle(page, 120)
        out["settled"] = time.perf_counter() - started - 0.6  # settle waits 0.6 s of calm
        out["first_message"] = wire.first
        out.update(ws_messages=wire.frames, ws_kb=round(wire.bytes / 1024, 1),
                   ws_largest_kb=round(wire.largest / 1024, 1))
        out.update(page.evaluate(COUNTS_JS))
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        for name in ("ScriptDuration", "LayoutDuration", "RecalcStyleDuration", "TaskDuration"):
            out[name] = round(metrics.get(name, 0.0), 2)
        out["JSHeapUsedMB"] = round(metrics.get("JSHeapUsedSize", 0) / 2**20, 1)
    finally:
        context.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--page", default="/")
    ap.add_argument("--loads", type=int, default=3)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="cfl-weight-") as tmp, \
            B.streamlit_server(Path(tmp) / "runs", log_path=str(Path(tmp) / "server.log")) as url, \
            sync_playwright() as p:
        browser = B.launch(p)
        try:
            load(browser, url + args.page)  # the server's first page (imports, caches) is not a newcomer's
            for _ in range(args.loads):
                print(json.dumps({k: round(v, 2) if isinstance(v, float) else v
                                  for k, v in load(browser, url + args.page).items()}), flush=True)
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
