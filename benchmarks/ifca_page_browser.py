"""The IFCA-initialisation page's 60 runs timed in a real browser: the estimate it shows against the time from Run to
"60 of 60 runs done", and whether the server keeps answering another session meanwhile.

    python benchmarks/ifca_page_browser.py [--repo DIR] [--runs 2] [--seeds N] [--out results.json]

Starts the dashboard headless (`python -m cfl_ui.serve`, as `make run`) from --repo (default: this checkout; any
checkout of the project works, so an older page can be timed the same way), opens the IFCA page in Debian's
chromium (Playwright), waits for the estimate, presses Run and waits for every run. --runs 2 runs a second sweep
(first seed 100, so nothing is resumed) in the same server: the local pool's workers are warm then. While a sweep
runs, a second browser context opens the Playground and the seconds until its Run button shows are recorded.
Prints one JSON object (and writes it to --out): per sweep the estimate text, the seconds, and the load.
--seeds N: N seeds instead of the page's default 10 (6 N runs: 3 init modes x IFCA and CLoVE; 2 gives 12).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


class _HealthProbe:
    """Asks the server's health endpoint every second from another thread: how long each answer took."""

    def __init__(self, url: str):
        import threading

        self.url, self.latencies, self._stop = url + "/_stcore/health", [], threading.Event()
        self._thread = threading.Thread(target=self._work, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(30)

    def _work(self):
        import urllib.request

        while not self._stop.is_set():
            t = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=60) as r:
                    r.read()
                self.latencies.append(time.perf_counter() - t)
            except OSError:
                self.latencies.append(float("inf"))
            self._stop.wait(1.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(HERE), help="the checkout whose dashboard is timed")
    ap.add_argument("--runs", type=int, default=2, help="sweeps in a row in one server (the second is warm)")
    ap.add_argument("--seeds", type=int, help="seeds of the sweep (6 runs each); default: the page's (10)")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from playwright.sync_api import sync_playwright

    from tools import browser as B

    B.REPO = Path(args.repo).resolve()  # the server runs that checkout's app.py
    runs = Path(tempfile.mkdtemp(prefix="ifca-bench-")) / "runs"
    out = {"repo": str(B.REPO), "cores": os.cpu_count(), "sweeps": []}
    with B.streamlit_server(runs, log_path=str(runs.parent / "streamlit.log")) as url, sync_playwright() as p:
        browser = B.launch(p)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1200})
            target = url + "/ifca-init" + (f"?seeds={args.seeds}" if args.seeds else "")
            n_runs = 6 * (args.seeds or 10)
            for i in range(args.runs):
                t_open = time.time()
                page.goto(target)
                page.get_by_text("Estimate:").first.wait_for(timeout=180000)
                B.settle(page)
                if page.get_by_text("Page not found").count():  # Streamlit's note on a deep link's first load
                    page.keyboard.press("Escape")
                    page.get_by_text("Page not found").first.wait_for(state="hidden", timeout=10000)
                estimate = page.get_by_text("Estimate:").first.inner_text()
                basis = [c.inner_text() for c in page.locator('[data-testid="stCaptionContainer"]').all()
                         if "measured" in c.inner_text() or "FLOP" in c.inner_text()]
                load_before = os.getloadavg()
                t_run = time.time()
                B.click_button(page, "Run")
                health = _HealthProbe(url).start()
                other = browser.new_page(viewport={"width": 1366, "height": 768})
                t_other = time.time()
                other.goto(url + "/", timeout=300000, wait_until="commit")
                other.get_by_role("button", name="Run", exact=True).first.wait_for(timeout=300000)
                other_s = time.time() - t_other
                other.close()
                B.wait_text(page, f"{n_runs} of {n_runs} runs done", 900)
                seconds = time.time() - t_run
                health.stop()
                # what the page computed when Run was pressed (the workers' start then partly done)
                at_run = re.findall(r"Estimated at Run: about (\d+) s", page.locator("body").inner_text())
                out["sweeps"].append({"sweep": i + 1, "runs": n_runs, "estimate": estimate.strip(), "basis": basis,
                                      "seconds_run_to_done": round(seconds, 1),
                                      "seconds_open_to_estimate": round(t_run - t_open, 1),
                                      "other_session_playground_ready_s": round(other_s, 1),
                                      "health_answers": len(health.latencies),
                                      "health_latency_max_s": round(max(health.latencies, default=0), 3),
                                      "health_latency_median_s": round(sorted(health.latencies)[
                                          len(health.latencies) // 2], 3) if health.latencies else None,
                                      "load_before": [round(x, 2) for x in load_before],
                                      "load_after": [round(x, 2) for x in os.getloadavg()],
                                      "estimate_at_run_seconds": float(at_run[0]) if at_run else None})
                shown = re.findall(r"about (\d+(?:\.\d+)?) (s|min)", estimate)
                if shown:
                    value, unit = shown[-1]
                    out["sweeps"][-1]["estimate_seconds"] = float(value) * (60 if unit == "min" else 1)
                print(json.dumps(out["sweeps"][-1]), flush=True)
                # the next sweep: the same settings from the page's own link, first seed 100 (nothing to resume)
                target = re.sub(r"([?&])seed=\d+(?=&|$)", r"\g<1>seed=100", page.url)
        finally:
            browser.close()
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
