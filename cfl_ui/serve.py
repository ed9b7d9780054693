"""Start the dashboard with the simulation libraries already loaded: `python -m cfl_ui.serve [streamlit flags]`.

Streamlit runs `app.py` inside the server process, but only when the first browser
connects; that first page view then paid for importing torch, scikit-learn and the
core (~3.5 s on the 2-core CPU) on top of drawing the page. Importing them here,
before the server starts listening, moves that wait to start-up, so the page a user
opens is interactive within the time it takes to draw. `make run` uses this;
`streamlit run app.py` still works, with the slower first view.
"""
from __future__ import annotations

import gc
import importlib
import importlib.util
import logging
import sys
import time
from pathlib import Path

def app_script() -> Path:
    """The dashboard's entry script: app.py at the root of a source checkout (or an editable install), else the
    copy an installed wheel carries in `cfl_lab/app/` (setup.py puts it there) beside pages/ and .streamlit/."""
    import cfl_ui

    checkout = Path(cfl_ui.__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "app.py").is_file():
        return checkout / "app.py"
    shipped = importlib.util.find_spec("cfl_lab")
    if shipped is not None and shipped.origin:
        installed = Path(shipped.origin).resolve().parent / "app" / "app.py"
        if installed.is_file():
            return installed
    return checkout / "app.py"  # `streamlit run` then names the path it could not find


APP = app_script()


# what the first page view imports: torch and scikit-learn (through the core), plotly, and every module the
# landing page (app.py, pages/playground.py) reaches on its first run, down to the preview's PNG writer and
# scikit-learn's bundled data sets: imported in that first run they took a quarter of a second of the server's
# interpreter lock while the browser was fetching the page's scripts from the same server
PRELOAD = ("cfl_core.algorithms", "cfl_core.plugins", "cfl_core.experiment", "cfl_core.compare",
           "cfl_ui.charts.figures", "cfl_ui.views.live_view", "cfl_ui.charts.theme", "cfl_ui.form.controls",
           "cfl_ui.form.job_specs", "cfl_ui.form.session", "cfl_ui.form.url_sync", "cfl_ui.form.controller", "cfl_ui.form.frame",
           "cfl_ui.form.page_choices", "cfl_ui.charts.literal", "cfl_ui.form.panel", "cfl_ui.jobs.run_refs",
           "cfl_ui.views.playground_view", "cfl_ui.form.preset_picker", "cfl_ui.jobs.snapshots",
           "cfl_ui.views.partition_charts", "cfl_ui.charts.partition_facts", "cfl_ui.jobs.estimate", "PIL.Image",
           "sklearn.datasets", "streamlit.material_icon_names")


def preload() -> float:
    """Import what the first page view needs and load the default preset's data set (kept in the core's
    in-process cache, as the page would); returns the seconds it took."""
    start = time.perf_counter()
    # st.cache_data decorators run at import; outside a runtime they only check their parameters and log
    # "No runtime found" (their storage is made at the first call, inside the server): not a user's concern
    importlib.import_module("streamlit.runtime.caching.cache_data_api")  # its logger exists from here on
    cache_log = logging.getLogger("streamlit.runtime.caching.cache_data_api")
    level = cache_log.level
    cache_log.setLevel(logging.ERROR)
    try:
        for name in PRELOAD:
            importlib.import_module(name)
    finally:
        cache_log.setLevel(level)
    from PIL import Image

    Image.preinit()  # the image formats PIL loads at its first save (the preview's PNGs)
    from cfl_core.data import load_dataset
    from cfl_ui.form.controls import default_config

    config = default_config()
    try:
        load_dataset(config["dataset"], seed=config.get("seed", 0))
    except Exception as exc:  # a warm-up only: the page reports a data set it cannot load, the server must start
        print(f"CFL Lab: the default data set was not preloaded ({type(exc).__name__}: {exc}); the page will say "
              "why", flush=True)
    return time.perf_counter() - start


def settle_heap() -> int:
    """Move everything loaded so far out of the garbage collector's sight (`gc.freeze`); returns how many objects.

    The libraries' ~330k objects live as long as the server; scanning them in each full collection (135 ms here)
    held the interpreter lock that the event loop and every page need."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    print(f"CFL Lab: loading the simulation libraries ({preload():.1f} s) ...", flush=True)
    settle_heap()
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(APP), *args]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
