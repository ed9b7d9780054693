"""Mean ± std over seeds of `compare` runs: the README's reproduction tables.

    python scripts/seed_table.py --dataset fashion-mnist --partitions feature-skew,concept-shift \
        --algorithms clove,ifca,fedavg,oracle --seeds 0,1,2 --out runs/fmnist-table [run flags...]

Any other flag is passed to the experiment config as in `python -m cfl_core run`
(e.g. --clusters 4 --clients-per-cluster 5 --samples-per-client 200 --rounds 25).
`--clusters-for PARTITION=K` overrides the cluster count for one partition
(label-skew-1 on 10 classes needs 5 clusters).
`table.md` reports the `clove` protocol (final round, mean over clients);
`protocols.md` gives the same runs under every paper's protocol (cfl_core.protocols;
`ifca` needs `--protocol ifca`, which records the test-machine accuracy).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cfl_core.cli.run_cmd import add_experiment_flags, config_from_args, profile_request  # noqa: E402
from cfl_core.compare import run_comparison  # noqa: E402
from cfl_core.protocols import PROTOCOLS, reported_accuracy  # noqa: E402
from cfl_core.records import load_run  # noqa: E402


def _folders(out: str, partition: str, seeds: list[int], name: str) -> list[Path]:
    return [Path(out) / partition / f"seed{seed}" / name for seed in seeds]

def mean_std(values: list[float], scale: float, digits: int = 2) -> str:
    values = [v * scale for v in values if v is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", required=True)
    parser.add_argument("--algorithms", required=True)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--clusters-for", action="append", default=[], metavar="PARTITION=K")
    parser.add_argument("--out", required=True)
    add_experiment_flags(parser, skip=("algorithm", "partition", "seed"))
    args = parser.parse_args(argv)
    algorithms = args.algorithms.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    cluster_override = dict(item.split("=") for item in args.clusters_for)
    lines = ["| partition | algorithm | final accuracy (%) | final test loss | final ARI | ARI = 1 | "
             "first round with ARI>=0.9 (median, rounds count from 0) |",
             "|---|---|---|---|---|---|---|"]
    reported: list[str] = []  # one row per algorithm and protocol: the accuracy each paper would report
    started = time.perf_counter()
    for partition in args.partitions.split(","):
        per_algo: dict[str, list[dict]] = {a: [] for a in algorithms}
        for seed in seeds:
            overrides = {"partition": partition, "seed": seed}
            if partition in cluster_override:
                overrides["clusters"] = int(cluster_override[partition])
            base = config_from_args(args, validate=False, profile=False, algorithm=algorithms[0], **overrides)
            results = run_comparison(base, algorithms, Path(args.out) / partition / f"seed{seed}",
                                     profile=profile_request(args))
            for name, summary in results.items():
                per_algo[name].append(summary)
                print(f"{partition} seed {seed} {name}: acc {summary['final_accuracy']} ARI {summary['final_ari']}",
                      file=sys.stderr, flush=True)
        for name, summaries in per_algo.items():
            firsts = [s["first_round_ari_0_9"] for s in summaries if s["first_round_ari_0_9"] is not None]
            first = f"{statistics.median(firsts):g} ({len(firsts)}/{len(summaries)} reach it)" if firsts else "never"
            perfect = sum(1 for s in summaries if s["final_ari"] is not None and s["final_ari"] > 1 - 1e-9)
            ari, perfect = mean_std([s["final_ari"] for s in summaries], 1), f"{perfect}/{len(summaries)}"
            if all(s["final_ari"] is None for s in summaries):
                ari = perfect = first = "n/a"  # no clusters (personalised FL) or no true ones: not a score of 0
            for protocol in PROTOCOLS:
                values = [reported_accuracy(protocol, load_run(folder).records)[0]
                          for folder in _folders(args.out, partition, seeds, name)]
                if any(v is not None for v in values):
                    reported.append(f"| {partition} | {name} | `{protocol}` | {mean_std(values, 100)} |")
            lines.append(f"| {partition} | {name} | {mean_std([s['final_accuracy'] for s in summaries], 100)} | "
                         f"{mean_std([s['final_loss'] for s in summaries], 1, digits=4)} | "
                         f"{ari} | {perfect} | {first} |")
    note = ("Accuracy protocol of this table: `clove` (the final round, unweighted mean over clients). "
            "The same runs under each paper's protocol (docs/faithfulness.md):")
    protocols = ["| partition | algorithm | protocol | reported accuracy (%) |", "|---|---|---|---|", *reported]
    table = "\n".join(lines) + "\n"
    by_protocol = note + "\n\n" + "\n".join(protocols) + "\n"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "table.md").write_text(table, encoding="utf-8")
    (Path(args.out) / "protocols.md").write_text(by_protocol, encoding="utf-8")
    print(table)
    print(by_protocol)
    print(f"total time {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
