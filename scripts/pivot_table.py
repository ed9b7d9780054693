"""One compact table from seed_table.py's run folders: a row per algorithm, a column per partition.

    python scripts/pivot_table.py runs/readme/digits-all runs/readme/digits-all-ls1 --metric final_accuracy
    python scripts/pivot_table.py runs/readme/digits-all --metric final_ari --algorithms kfed,pacfl,clove

Reads <folder>/<partition>/seed<N>/<algorithm>/summary.json (what seed_table.py writes) and prints mean ± std
over the seeds of the metric (accuracy in %), "n/a" where the metric does not apply (ARI of an algorithm
without clusters), and for ARI how many seeds found the clusters exactly.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def collect(folders: list[str]) -> dict[tuple[str, str], list[dict]]:
    """{(partition, algorithm): [summary per seed]} from every run folder under the given tables."""
    out: dict[tuple[str, str], list[dict]] = {}
    for folder in folders:
        for path in sorted(Path(folder).glob("*/seed*/*/summary.json")):
            algorithm, partition = path.parent.name, path.parents[2].name
            out.setdefault((partition, algorithm), []).append(json.loads(path.read_text(encoding="utf-8")))
    return out


def cell(summaries: list[dict], metric: str) -> str:
    values = [s.get(metric) for s in summaries]
    if all(v is None for v in values):
        return "n/a"
    values = [v for v in values if v is not None]
    scale, digits = (100, 1) if "accuracy" in metric else (1, 2)
    mean = statistics.mean(values) * scale
    text = f"{mean:.{digits}f}" if len(values) < 2 else f"{mean:.{digits}f} ± {statistics.stdev(values) * scale:.{digits}f}"
    if metric == "final_ari":
        text += f" ({sum(1 for v in values if v > 1 - 1e-9)}/{len(values)})"
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--metric", default="final_accuracy")
    parser.add_argument("--algorithms", help="rows, in this order (default: all found)")
    parser.add_argument("--partitions", help="columns, in this order (default: all found)")
    args = parser.parse_args(argv)
    data = collect(args.folders)
    if not data:
        print("no summaries found", file=sys.stderr)
        return 1
    partitions = args.partitions.split(",") if args.partitions else list(dict.fromkeys(p for p, _ in data))
    algorithms = args.algorithms.split(",") if args.algorithms else list(dict.fromkeys(a for _, a in data))
    print("| algorithm | " + " | ".join(partitions) + " |")
    print("|---|" + "---|" * len(partitions))
    for a in algorithms:
        cells = [cell(data[(p, a)], args.metric) if (p, a) in data else "-" for p in partitions]
        print(f"| {a} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
