"""Mean final accuracy (and ARI) of one algorithm over values of its options: how the defaults in the
algorithms' docstrings were measured.

    python scripts/option_sweep.py --algorithm fedprox --grid mu=0,0.001,0.01,0.1,1 \
        --partitions feature-skew,concept-shift --seeds 0,1,2 --rounds 30

`--grid` may be given several times (the grid is their product); any other flag goes to the experiment
config as in `python -m cfl_core run` (defaults: 4 clusters x 5 clients, 60 samples, digits). Every value
of a seed and partition runs on the identical federation.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cfl_core.algorithms import ALGORITHMS  # noqa: E402
from cfl_core.cli.run_cmd import add_experiment_flags, config_from_args  # noqa: E402
from cfl_core.experiment import Experiment, Setup  # noqa: E402
from cfl_core.sweep.tables import mean_std  # noqa: E402
from cfl_core.settings import settings_of  # noqa: E402


def _grid(items: list[str], options_cls) -> list[dict]:
    declared = settings_of(options_cls)
    axes = []
    for item in items:
        key, _, values = item.partition("=")
        axes.append([(key, declared[key].coerce(v, text=True)) for v in values.split(",")])
    return [dict(point) for point in itertools.product(*axes)] or [{}]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithm", dest="algo", required=True)
    parser.add_argument("--grid", action="append", default=[], metavar="OPTION=V1,V2,...")
    parser.add_argument("--partitions", required=True)
    parser.add_argument("--seeds", default="0,1,2")
    add_experiment_flags(parser, skip=("algorithm", "partition", "seed"))
    args = parser.parse_args(argv)
    algo = ALGORITHMS[args.algo]
    points = _grid(args.grid, algo.Options)
    seeds = [int(s) for s in args.seeds.split(",")]
    started = time.perf_counter()
    print(f"| partition | {args.algo} options | final accuracy (%) | final ARI |")
    print("|---|---|---|---|")
    for partition in args.partitions.split(","):
        results = {i: [] for i in range(len(points))}
        for seed in seeds:
            base = config_from_args(args, validate=False, algorithm=args.algo, partition=partition, seed=seed)
            if base.models is None and algo.needs_models:
                base = base.replace(models=base.clusters)
            setup = None
            for i, point in enumerate(points):
                cfg = base.replace(options={**base.options, **point})
                cfg.validate()
                setup = setup if setup is not None and setup.same_clients(cfg) else Setup.build(cfg)
                exp = Experiment(cfg, setup=setup)
                results[i].append(exp.run())
        for i, point in enumerate(points):
            text = ", ".join(f"{k}={v}" for k, v in point.items()) or "defaults"
            print(f"| {partition} | {text} | {mean_std([s['final_accuracy'] for s in results[i]], 100, missing='n/a')} | "
                  f"{mean_std([s['final_ari'] for s in results[i]], 1, missing='n/a')} |", flush=True)
    print(f"total time {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
