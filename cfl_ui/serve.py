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
import sys
import time
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app.py"


# what the first page view imports: torch and scikit-learn (through the core), plotly
PRELOAD = ("cfl_core.algorithms", "cfl_core.experiment", "cfl_ui.figures", "cfl_ui.live_view")


def preload() -> float:
    """Import what the first page view needs; returns the seconds it took."""
    start = time.perf_counter()
    for name in PRELOAD:
        importlib.import_module(name)
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
