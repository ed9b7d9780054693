"""Driving the dashboard in a real browser: a headless server and Debian's chromium via Playwright.

Used by tests/test_e2e_browser.py and assets/make_screenshots.py. The browser is
the system's chromium (never downloaded by Playwright).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("CFL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
MISSING_BROWSER = ("chromium was not found at {path}: install it with `apt-get install chromium` "
                   "(the end-to-end test drives Debian's chromium; Playwright never downloads a browser)")


def chromium_path() -> str | None:
    if Path(CHROMIUM).exists():
        return CHROMIUM
    return shutil.which("chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(runs_dir: str | os.PathLike, port: int | None = None, log_path: str | None = None,
                     timeout: float = 90.0, env: dict | None = None, preload: bool = True,
                     app: str | os.PathLike | None = None):
    """The dashboard headless on a free port; yields the base URL; stops it (by its pid) after.

    `preload`: start it as `make run` does (`python -m cfl_ui.serve`: libraries imported before
    the server listens); otherwise plain `streamlit run app.py`. `app`: plain `streamlit run` of that
    script instead of the dashboard (a benchmark's reference page)."""
    port = port or free_port()
    full_env = {**os.environ, "CFL_RUNS_DIR": str(runs_dir), **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full_env.get("PYTHONPATH")]))
    log = open(log_path, "w") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", *(["cfl_ui.serve"] if preload and app is None
                                 else ["streamlit", "run", str(app or REPO / "app.py")]),
         "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=str(REPO), env=full_env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {proc.returncode}" +
                                   (f"; see {log_path}" if log_path else ""))
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise TimeoutError(f"streamlit did not answer on {url} within {timeout:.0f} s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if log_path:
            log.close()


def launch(playwright):
    path = chromium_path()
    if path is None:
        raise FileNotFoundError(MISSING_BROWSER.format(path=CHROMIUM))
    return playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)


def wait_ready(page, timeout: float = 90.0) -> None:
    """Until the page has drawn its sidebar (collapsed in a narrow window: there, but with no width) and no script
    is running."""
    page.locator('[data-testid="stSidebar"]').wait_for(state="attached", timeout=timeout * 1000)
    settle(page, timeout)


def settle(page, timeout: float = 60.0, quiet: float = 0.6) -> None:
    """Until Streamlit's "running" indicator has been gone for `quiet` seconds."""
    deadline = time.time() + timeout
    calm_since = None
    while time.time() < deadline:
        busy = page.locator('[data-testid="stStatusWidget"]').count() > 0
        if busy:
            calm_since = None
        elif calm_since is None:
            calm_since = time.time()
        elif time.time() - calm_since >= quiet:
            return
        time.sleep(0.1)


def choose(page, label: str, option: str, attempts: int = 3) -> None:
    """Pick an option of a Streamlit selectbox by its label (opens the list, clicks the option)."""
    box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_role("combobox", name=label)).first
    for attempt in range(attempts):
        box.get_by_role("button", name="Open").first.click()
        opt = page.get_by_role("option", name=option, exact=True).first
        try:
            opt.wait_for(timeout=5000)
        except Exception:
            if attempt == attempts - 1:
                raise
            page.keyboard.press("Escape")
            continue
        opt.click()
        return


def click_button(page, name: str) -> None:
    page.get_by_role("button", name=name, exact=True).first.click()


def click_until(page, name: str, text: str, attempts: int = 3, wait: float = 20.0) -> None:
    """Click a button until `text` shows (a click that lands while the page redraws itself can be lost);
    the next attempt only when `text` has not appeared in `wait` seconds."""
    for attempt in range(attempts):
        click_button(page, name)
        try:
            page.get_by_text(text).first.wait_for(timeout=wait * 1000)
            return
        except Exception:
            if attempt == attempts - 1:
                raise


def wait_text(page, text: str, timeout: float = 120.0) -> None:
    page.get_by_text(text).first.wait_for(timeout=timeout * 1000)


def wait_finished(page, text: str, timeout: float = 180.0) -> None:
    """Until a status line holds `text` and says finished. The page is searched afresh at every check: a rerun
    may draw the status line as a new element, and a handle to the old one would never see 'finished'."""
    page.wait_for_function(
        "(text) => Array.from(document.querySelectorAll('[data-testid=\"stMarkdownContainer\"]'))"
        ".some(el => el.innerText.includes(text) && el.innerText.includes('finished'))",
        arg=text, timeout=timeout * 1000)


# What a reader of the page can read, measured in the browser (a teacher's 1366-, 1024- or 800-px window):
#   clipped:  headline numbers, their deltas and widget labels cut short (an element whose text is wider than its
#             box; not in a collapsed sidebar)
#   toolbar:  texts of a chart (legend, notes, titles) under plotly's toolbar
#   outside:  scatter points (whole markers) outside their plot area
#   overlaps: texts of one chart (captions, legend entries, axis titles, replay buttons) drawn over each other
READABLE_JS = r"""
() => {
  const boxes = (els) => Array.from(els).map(e => [e, e.getBoundingClientRect()]).filter(([e, b]) => b.width > 0 && b.height > 0);
  const meet = (a, b, slack = 1) => a.left < b.right - slack && b.left < a.right - slack && a.top < b.bottom - slack && b.top < a.bottom - slack;
  const out = {clipped: [], toolbar: [], outside: [], overlaps: [], plots: 0, points: 0};
  document.querySelectorAll('[data-testid="stMetricValue"], [data-testid="stMetricLabel"], [data-testid="stMetricDelta"], [data-testid="stWidgetLabel"]').forEach(e => {
    if (e.closest('[data-testid="stSidebar"][data-collapsed="true"]')) return;  // a collapsed sidebar shows nothing
    [e, ...e.querySelectorAll('*')].forEach(n => {
      if (n.clientWidth > 0 && n.scrollWidth > n.clientWidth + 1) out.clipped.push(e.innerText.trim().slice(0, 40));
    });
  });
  document.querySelectorAll('.js-plotly-plot').forEach((plot, i) => {
    out.plots += 1;
    const bar = plot.querySelector('.modebar');
    const texts = boxes(plot.querySelectorAll('.legendtext, .legendtitletext, .annotation-text, .gtitle, .cbtitle text, .g-xtitle text, .g-ytitle text'));
    if (bar) {
      const b = bar.getBoundingClientRect();
      texts.forEach(([t, tb]) => { if (meet(b, tb)) out.toolbar.push([i, t.textContent.slice(0, 30)]); });
    }
    plot.querySelectorAll('.cartesianlayer .subplot').forEach(sub => {
      const bg = sub.querySelector('.bglayer rect, .plotbg rect') || plot.querySelector('.bglayer rect');
      const drag = plot.querySelector('.nsewdrag');
      const area = (drag || bg) ? (drag || bg).getBoundingClientRect() : null;
      if (!area) return;
      sub.querySelectorAll('.scatterlayer .trace .points path').forEach(p => {
        const r = p.getBoundingClientRect();
        if (r.width === 0) return;
        out.points += 1;
        const cx = (r.left + r.right) / 2, cy = (r.top + r.bottom) / 2, rad = Math.min(r.width, r.height) / 2;
        if (cx - rad < area.left - 1 || cx + rad > area.right + 1 || cy - rad < area.top - 1 || cy + rad > area.bottom + 1)
          out.outside.push([i, Math.round(cx - area.left), Math.round(cy - area.top), Math.round(area.width), Math.round(area.height)]);
      });
    });
    const labels = boxes(plot.querySelectorAll('.annotation-text, .legendtext, .g-xtitle text, .g-ytitle text, .updatemenu-item-text, .slider-label'));
    for (let a = 0; a < labels.length; a++) for (let b = a + 1; b < labels.length; b++)
      if (meet(labels[a][1], labels[b][1], 2)) out.overlaps.push([i, labels[a][0].textContent.slice(0, 20), labels[b][0].textContent.slice(0, 20)]);
  });
  return out;
}
"""


def readability(page) -> dict:
    """READABLE_JS's findings on the page as it is now: {"clipped", "toolbar", "outside", "overlaps": [...],
    "plots": charts, "points": scatter markers checked}."""
    return page.evaluate(READABLE_JS)


def full_screenshot(page, path: str | os.PathLike, width: int = 1600) -> None:
    """The whole main area (Streamlit scrolls inside it, not the document)."""
    measure = ("() => Math.max(...Array.from(document.querySelectorAll("
               "'[data-testid=\"stMainBlockContainer\"] > div, [data-testid=\"stSidebarUserContent\"] > div,"
               " [data-testid=\"stSidebarNav\"]'))"
               ".map(e => e.getBoundingClientRect().bottom), 860)")
    height = 0
    for _ in range(4):  # the layout may grow as charts size themselves to the new viewport
        new = int(page.evaluate(measure)) + 60
        if abs(new - height) < 20:
            break
        height = new
        page.set_viewport_size({"width": width, "height": min(height, 8000)})
        time.sleep(1.0)
    page.screenshot(path=str(path))


# Whether text stands out from what is behind it (WCAG's contrast ratio, 4.5 for body text), measured in the
# browser: the page's background, and for every headline number and label, caption and chart text its colour
# (with its own alpha and every ancestor's opacity, blended over the background) against the first opaque
# background behind it (a chart's paper is the background of its svg; an annotation's box is blended over that).
# Used for the dark theme (chromium asked for a dark colour scheme).
CONTRAST_JS = r"""
() => {
  const rgba = (s) => { const m = (s || '').match(/rgba?\(([^)]+)\)/); if (!m) return null;
    const v = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
  const lum = (c) => { const f = (x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const [h, l] = [lum(a), lum(b)].sort((x, y) => y - x); return (h + 0.05) / (l + 0.05); };
  const app = document.querySelector('[data-testid="stApp"]') || document.body;
  const page = rgba(getComputedStyle(app).backgroundColor);
  const behind = (e) => { for (let n = e; n && n.nodeType === 1; n = n.parentElement) {
      const c = rgba(getComputedStyle(n).backgroundColor); if (c && c[3] > 0.5) return c; } return page; };
  const opacity = (e) => { let o = 1; for (let n = e; n && n.nodeType === 1; n = n.parentElement) o *= Number(getComputedStyle(n).opacity);
    return o; };
  const out = {background: page.slice(0, 3), luminance: lum(page), checked: 0, poor: [], kinds: {}};
  const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3]));
  const check = (kind, e, colour, box) => {
    const r = e.getBoundingClientRect(); if (r.width === 0 || !e.textContent.trim()) return;
    const c = rgba(colour); if (!c) return;
    let bg = behind(e.parentElement || e); if (box) bg = over(box, bg);
    const a = c[3] * opacity(e);
    const fg = [0, 1, 2].map(i => c[i] * a + bg[i] * (1 - a));
    const q = ratio(fg, bg); out.checked += 1; out.kinds[kind] = (out.kinds[kind] || 0) + 1;
    if (q < 4.5) out.poor.push([kind, e.textContent.trim().slice(0, 30), Math.round(q * 100) / 100]);
  };
  document.querySelectorAll('[data-testid="stMetricValue"], [data-testid="stMetricLabel"] p').forEach(e => check('metric', e, getComputedStyle(e).color));
  document.querySelectorAll('[data-testid="stCaptionContainer"] p').forEach(e => check('caption', e, getComputedStyle(e).color));
  document.querySelectorAll('.js-plotly-plot .main-svg text').forEach(e => {
    if (e.closest('.heatmaplayer')) return;  // a heatmap cell's count stands on the cell's colour, not the page
    const s = getComputedStyle(e), c = rgba(s.fill); if (!c) return;
    c[3] *= Number(s.fillOpacity || 1);
    // an annotation with a box (a lesson's note) stands on the box's fill, an svg rect, not on a CSS background
    const rect = e.closest('.annotation') && e.closest('.annotation').querySelector('rect.bg');
    let box = null;
    if (rect) { const rs = getComputedStyle(rect); box = rgba(rs.fill); if (box) box[3] *= Number(rs.fillOpacity || 1); }
    check('chart', e, `rgba(${c.join(',')})`, box && box[3] > 0 ? box : null);
  });
  return out;
}
"""


def contrast(page) -> dict:
    """CONTRAST_JS's findings: {"background": [r, g, b], "luminance", "checked", "kinds": {kind: n},
    "poor": [[kind, text, ratio], ...] (ratio under 4.5)}."""
    return page.evaluate(CONTRAST_JS)


def open_sidebar(page) -> None:
    """Open the sidebar where it starts collapsed (narrow windows: cfl_ui.charts.theme.SIDEBAR_JS)."""
    bar = page.locator('[data-testid="stSidebar"]').first
    if bar.get_attribute("data-collapsed") == "true":
        page.locator('[data-testid="stExpandSidebarButton"]').first.click()
        page.wait_for_function("() => document.querySelector('[data-testid=\"stSidebar\"]')"
                               ".getAttribute('data-collapsed') === 'false'")


def close_sidebar(page) -> None:
    bar = page.locator('[data-testid="stSidebar"]').first
    if bar.get_attribute("data-collapsed") != "true":
        page.locator('[data-testid="stSidebarCollapseButton"] button').first.click(force=True)
        page.wait_for_function("() => document.querySelector('[data-testid=\"stSidebar\"]')"
                               ".getAttribute('data-collapsed') === 'true'")
