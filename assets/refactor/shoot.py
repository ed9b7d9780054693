"""Screenshots of the three training pages at 1366x768 (issue 33: the same page before and after the refactor).

    .venv/bin/python assets/refactor/shoot.py PREFIX        # PREFIX: before or after

Starts the dashboard headless (runs in a temporary folder), opens Playground, Compare and IFCA initialisation
as a first visit does, and saves PREFIX_<page>.png; then the same pages in presenter mode (?present=1) as
PREFIX_present_<page>.png, and at 800x900 (the sidebar starts collapsed) as PREFIX_narrow_<page>.png. Prints how many
Run buttons are visible on each (one: presenter mode and narrow windows show the copy under the title).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tools import browser as B  # noqa: E402

PAGES = {"playground": ("", "Run"), "compare": ("compare", "Run all"), "ifca_init": ("ifca-init", "Run")}


def main(prefix: str) -> int:
    from playwright.sync_api import sync_playwright

    out = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory() as runs, B.streamlit_server(runs) as url:
        with sync_playwright() as p:
            browser = B.launch(p)
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            for mode in ("", "present_", "narrow_"):
                if mode == "narrow_":
                    page.close()
                    page = browser.new_page(viewport={"width": 800, "height": 900})
                for name, (path, run) in PAGES.items():
                    page.goto(f"{url}/{path}" + ("?present=1" if mode == "present_" else ""))
                    B.wait_ready(page)
                    page.wait_for_timeout(1500)
                    shot = out / f"{prefix}_{mode}{name}.png"
                    page.screenshot(path=str(shot))
                    buttons = page.get_by_role("button", name=run, exact=True)
                    visible = sum(buttons.nth(i).is_visible() for i in range(buttons.count()))
                    print(f"{shot.name}: {visible} visible {run!r} button(s)")
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "after"))
