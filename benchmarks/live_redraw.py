"""The server's cost of one poll of the Playground's live view, per watching session, as a run grows.

    python benchmarks/live_redraw.py RUN_FOLDER [--rounds 40,300,1000,2000] [--repeats 3] [--ended]

Takes a finished run folder (e.g. `python -m cfl_core run --dataset digits --partition feature-skew --clusters 4
--clients-per-cluster 5 --algorithm clove --models 4 --rounds 40 --out /tmp/r40`), lengthens its records to each
round count (its later rounds repeated, renumbered) and draws the live view of that running unit outside a server
(Streamlit's bare mode, no browser): "first" is the poll that builds the figures of a new frame (once per frame
for all sessions), "redraw" a poll of another session in the same frame (every figure cached). Prints one line
per round count (the median of --repeats). `--ended` draws instead what every watching session draws once when the
job ends (its whole page reruns: the finished view, the replay of every round and the Export section): "first" the
session that builds the figures, "redraw" the others.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a finished run folder")
    ap.add_argument("--rounds", default="40,300,1000,2000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ended", action="store_true", help="the page of a job that has just ended")
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # bare mode warns at every element
    from cfl_ui.views import live_view as L
    from cfl_ui.jobs.snapshots import FINISHED, RUNNING
    from cfl_ui.jobs.store import load_unit

    base = load_unit(args.run, "bench")
    recs = list(base.records)
    if len(recs) < 6:
        print("the run needs at least 6 rounds", file=sys.stderr)
        return 2

    def grown(n):
        tail = recs[5:]
        return tuple(dataclasses.replace(recs[i] if i < len(recs) else tail[i % len(tail)], round=i)
                     for i in range(n))

    status = FINISHED if args.ended else RUNNING

    class Snap:  # what the live view reads of a job
        live = not args.ended

    Snap.status = status
    # as the server's polled fragment draws a running job: its Export section is outside the fragment
    # (cfl_ui.views.live_view.live_view: exports only when not polled), made when its button is pressed; an ended job's
    # page draws it
    draw = dict(live=not args.ended, exports=args.ended)
    L.render_units(Snap(), [dataclasses.replace(base, ref="warm-up")], "warm", **draw)  # imports, first use
    for n in [int(v) for v in args.rounds.split(",")]:
        firsts, redraws = [], []
        for r in range(args.repeats):
            unit = dataclasses.replace(base, records=grown(n), status=status, ref=f"bench-{n}-{r}")
            t = time.perf_counter()
            L.render_units(Snap(), [unit], "a", **draw)
            firsts.append(time.perf_counter() - t)
            t = time.perf_counter()
            L.render_units(Snap(), [unit], "b", **draw)
            redraws.append(time.perf_counter() - t)
        what = ("first view of the ended job", "another session's view") if args.ended else (
            "first poll of a frame", "another session's poll")
        print(f"{n:5d} rounds: {what[0]} {statistics.median(firsts) * 1000:6.0f} ms, "
              f"{what[1]} {statistics.median(redraws) * 1000:6.0f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
