"""What one live chart costs the server to build and encode, this checkout's builders beside an older revision's,
timed in one process (so both see the same machine load).

    python benchmarks/figure_cost.py RUN_FOLDER [--base REV] [--rounds 40,400,2000] [--repeats 5]

RUN_FOLDER is a finished run (e.g. `python -m cfl_core run --dataset digits --partition feature-skew --clusters 4
--clients-per-cluster 5 --algorithm clove --models 4 --rounds 40 --out /tmp/r40`), lengthened to each round count
as in live_redraw.py. For each of a running unit's charts (the live embedding, the heatmap, clients per model, the
accuracy and the ARI curves, and "views": every figure of the algorithm's "What else the algorithm recorded" views,
cfl_ui.views.algorithm_views.extra_views, e.g. CLoVE's stability / choosing K) it prints the best of --repeats of:
building the figure(s), then what the chart helper does once per figure (`Figure.to_dict` and plotly's JSON
encoding, cfl_ui.charts.draw.Prepared), and the JSON's size. `--base` (default: the commit before the dict builders)
names
the revision whose cfl_ui/charts/figures.py and cfl_ui/views/algorithm_views.py are compared. `--check` also compares
the JSON each
chart sends, this checkout's against the base's (typed arrays decoded, numbers within 1e-9), and prints the paths that
differ: the dict builders must draw what the graph objects drew.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
BASE = "73da86f"  # the last commit whose live charts (and algorithm views) were built through plotly's graph objects


def builders_at(rev: str, module: str = "figures"):
    """cfl_ui/<module>.py as it was at `rev`, imported beside this checkout's (it imports the same helpers)."""
    text = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:cfl_ui/{module}.py"], check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="cfl-figs-")) / f"{module}_base.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"cfl_ui._{module}_base", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def plain(value):
    """A figure's JSON made comparable: plotly's typed arrays ({"dtype", "bdata", "shape"}) decoded to lists,
    numbers as floats, NaN as None."""
    import base64

    import numpy as np

    if isinstance(value, dict):
        if {"dtype", "bdata"} <= set(value):
            array = np.frombuffer(base64.b64decode(value["bdata"]), np.dtype(value["dtype"]))
            if "shape" in value:
                array = array.reshape([int(v) for v in str(value["shape"]).split(",")])
            return plain(array.astype(float).tolist())
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None if value != value else float(value)
    return value


def differences(a, b, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str) for d in (
            differences(a[k], b[k], f"{path}/{k}") if k in a and k in b else [f"{path}/{k} only in one"])]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float):
        return [] if abs(a - b) <= 1e-9 * max(1.0, abs(a)) else [f"{path}: {a} vs {b}"]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def best(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a finished run folder")
    ap.add_argument("--base", default=BASE)
    ap.add_argument("--rounds", default="40,400,2000")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--check", action="store_true", help="also compare the JSON each chart sends")
    args = ap.parse_args()
    import plotly.io as pio

    from cfl_ui.views import algorithm_views as views_now
    from cfl_ui.charts import draw as charts
    from cfl_ui.charts import figures as now
    from cfl_ui.charts.embedding import PCA, loss_embedding
    from cfl_ui.views.run_charts import series_of
    from cfl_ui.jobs.store import load_unit

    base, views_base = builders_at(args.base), builders_at(args.base, "algorithm_views")
    unit = load_unit(args.run, "bench")
    recs = list(unit.records)
    tail = recs[5:]
    encode = charts._PLOTLY_TO_JSON
    print(f"builders: this checkout vs {args.base}; best of {args.repeats}; ms")
    print(f"{'rounds':>6} {'chart':6} | {'build':>7} {'encode':>7} {'total':>7} {'kB':>6} | {'build':>7} "
          f"{'encode':>7} {'total':>7} {'kB':>6} | {'ratio':>5}")
    totals = {"base": 0.0, "now": 0.0}
    checked = mismatched = 0
    for n in [int(v) for v in args.rounds.split(",")]:
        grown = tuple(dataclasses.replace(recs[i] if i < len(recs) else tail[i % len(tail)], round=i)
                      for i in range(n))
        u = dataclasses.replace(unit, records=grown)
        emb = loss_embedding(u.records, PCA, cache_key=f"bench-{n}")
        series = series_of([u])
        # each chart: (its builder given the module, the base's module, this checkout's); "views" builds a list
        charts_of = {"emb": (lambda F: F.embedding_figure(emb, None, height=470, animate=False), base, now),
                     "heat": (lambda F: F.assignment_heatmap(u.records), base, now),
                     "area": (lambda F: F.clients_per_model(u.records), base, now),
                     "acc": (lambda F: F.metric_figure(series, ["accuracy"]), base, now),
                     "ari": (lambda F: F.metric_figure(series, ["ari", "nmi"], target=0.9,
                                                       y_title="agreement with true clusters"), base, now),
                     "views": (lambda A: [v.figure for v in A.extra_views(u.algorithm, u.records, None)
                                          if v.figure is not None], views_base, views_now)}
        for name, (build, *modules) in charts_of.items():
            row = []
            for label, F in zip(("base", "now"), modules):
                t_build, out = best(lambda: build(F), args.repeats)
                figs = out if isinstance(out, list) else [out]
                t_enc, texts = best(lambda: [encode(f.to_dict(), validate=False) for f in figs], args.repeats)
                totals[label] += t_build + t_enc
                row.append((t_build, t_enc, sum(map(len, texts))))
            cells = " | ".join(f"{1e3 * b:7.1f} {1e3 * e:7.1f} {1e3 * (b + e):7.1f} {k / 1e3:6.1f}" for b, e, k in row)
            ratio = (row[0][0] + row[0][1]) / max(1e-9, row[1][0] + row[1][1])
            print(f"{n:6d} {name:6} | {cells} | {ratio:5.1f}x", flush=True)
            if args.check:
                outs = [build(F) for F in modules]
                pairs = list(zip(*outs)) if isinstance(outs[0], list) else [outs]
                if isinstance(outs[0], list) and len(outs[0]) != len(outs[1]):
                    pairs = []
                    print(f"       differs: {len(outs[0])} vs {len(outs[1])} figures")
                    mismatched += 1
                for pair in pairs:
                    found = differences(*(plain(json.loads(encode(f.to_dict(), validate=False))) for f in pair))
                    checked += 1
                    for line in found[:10]:
                        print(f"       differs: {line}")
                    mismatched += bool(found)
    print(f"all charts: {1e3 * totals['base']:.0f} ms ({args.base}) vs {1e3 * totals['now']:.0f} ms (this checkout)")
    if args.check:
        print(f"JSON compared: {checked} figures, {mismatched} differ")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
