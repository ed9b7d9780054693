"""End to end in a real browser: `streamlit run app.py` headless, driven in Debian's chromium with Playwright.

The browser is the system's chromium at /usr/bin/chromium (never downloaded by Playwright). A missing
browser FAILS this test (CI installs chromium; a silent skip would hide a broken end-to-end path).
"""
from __future__ import annotations

import json

import pytest

from tools import browser as B
from cfl_ui.form.presets import SIGNATURE_PRESET


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["make-run", "streamlit-run"])
def test_signature_preset_runs_in_the_browser(tmp_path, launcher):
    # make-run: `python -m cfl_ui.serve` (libraries preloaded); streamlit-run: plain `streamlit run app.py`
    if B.chromium_path() is None:
        pytest.fail(B.MISSING_BROWSER.format(path=B.CHROMIUM))
    from playwright.sync_api import expect, sync_playwright

    runs = tmp_path / "runs"
    with B.streamlit_server(runs, log_path=str(tmp_path / "streamlit.log"), preload=launcher == "make-run") as url, \
            sync_playwright() as p:
        browser = B.launch(p)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1200})
            page.goto(url + "/")
            # .first: the main area's copy of the run bar (for narrow windows) is hidden by the theme's CSS, but a
            # redraw can show both for a moment (CI once saw two "Run" buttons here)
            page.get_by_role("button", name="Run", exact=True).first.wait_for(timeout=90000)
            B.settle(page)
            B.choose(page, "Preset", SIGNATURE_PRESET)
            # wait for the preset's rerun to fill the boxes (under load the first read came before it: 'CLoVE')
            expect(page.get_by_role("combobox", name="Algorithm").first).to_have_value("IFCA", timeout=60000)
            expect(page.get_by_role("combobox", name="Side by side with").first).to_have_value("CLoVE",
                                                                                               timeout=60000)
            B.settle(page)
            B.click_button(page, "Run")
            B.wait_text(page, "20 of 20 rounds each", 240)  # IFCA and CLoVE
            B.wait_finished(page, "20 of 20 rounds each", 60)
            B.settle(page)
            page.locator(".js-plotly-plot").nth(7).wait_for(timeout=60000)

            # the charts of both algorithms
            for title in ("How IFCA sees the clients", "How CLoVE sees the clients", "Who trains which model",
                          "Clients per model", "Accuracy over rounds", "Clusters found (ARI) over rounds"):
                assert page.get_by_text(title).first.is_visible(), title
            assert page.locator(".js-plotly-plot").count() >= 8
            # the headline ARI of each: IFCA collapsed, CLoVE recovered the clusters
            values = []
            for metric in page.locator('[data-testid="stMetric"]').all():
                label = metric.locator('[data-testid="stMetricLabel"]').inner_text().strip()
                if label == "ARI":
                    values.append(metric.locator('[data-testid="stMetricValue"]').inner_text().strip())
            assert values == ["0.00", "1.00"], values
            page.screenshot(path=str(tmp_path / "signature.png"), full_page=True)
            assert (tmp_path / "signature.png").stat().st_size > 10_000
        finally:
            browser.close()

    # the run is on disk, both algorithms finished, and the URL carried its id
    jobs = [d for d in runs.iterdir() if d.is_dir()]
    job = next(d for d in jobs if "IFCA-vs-CLoVE" in d.name)
    for unit, ari in (("ifca", 0.0), ("clove", 1.0)):
        summary = json.loads((job / unit / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["rounds_completed"] == 20
        assert summary["final_ari"] == pytest.approx(ari, abs=1e-6)
