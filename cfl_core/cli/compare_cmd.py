"""`python -m cfl_core compare`: several algorithms on the identical federation and initial models.

A sweep with one point per algorithm (`folder: {algorithm}`): the runs go to the sweep's executor
(a local process pool by default, or Ray), and re-running the same command skips the finished ones.
Identical clients and initial models follow from the identical seed and data fields of every point.
"""
from __future__ import annotations

import sys

from ..compare import compare_table, comparison_configs
from ..errors import ConfigError
from .flags import out_folder
from .run_cmd import add_experiment_flags, bound_memory, config_from_args, profile_request, summary_line
from .sweep_cmd import SweepBar, add_executor_flags, runs_at_once

PER_ALGORITHM = ("algorithm", "models", "options")


def compare_spec(base, names: list[str], profile: tuple | None = None) -> dict:
    """The sweep spec of a comparison: the shared fields as base, one case per algorithm (compare's rules).

    With a profile (`run_cmd.profile_request`) each algorithm's case also holds the fields its profile sets."""
    configs = comparison_configs(base, names, profile=profile)  # K-hat defaults, options, profiles; validated
    base_dict = base.to_dict()
    varying = set(PER_ALGORITHM) | {k for c in configs for k, v in c.to_dict().items() if v != base_dict[k]}
    per_case = [k for k in base_dict if k in varying]
    shared = {k: v for k, v in base_dict.items() if k not in varying}
    cases = [{k: getattr(c, k) for k in per_case} for c in configs]
    return {"name": "compare", "description": "compare: " + ", ".join(names), "base": shared, "cases": cases,
            "folder": "{algorithm}"}


def run(args) -> int:
    from ..sweep import SweepSpec, run_sweep

    names = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    if not names:
        raise ConfigError("algorithms", args.algorithms, "a comma-separated list such as clove,ifca,fedavg,oracle")
    base = config_from_args(args, validate=False, profile=False, algorithm=names[0])
    # every algorithm's config refused before anything is written
    spec = SweepSpec.from_dict(compare_spec(base, names, profile_request(args)))
    configs = [p.config for p in spec.expand(max_points=None).points]
    bound_memory(configs, runs_at_once(args, len(configs)), args.memory_mb)  # before any folder or data
    out = out_folder(args.out, empty=False)  # a folder (never a file, '' or /proc); the same command resumes it
    bar = SweepBar("compare")
    try:
        outcome = run_sweep(spec, out, executor=args.executor, workers=args.workers, cpus_per_run=args.cpus_per_run,
                            address=args.address, max_points=None, replace=True, on_progress=bar)
    except KeyboardInterrupt:
        bar.close()
        print(f"interrupted: every finished run is in {out}; the same command resumes", file=sys.stderr)
        return 130
    bar.close()
    results = {}
    for point in outcome.expansion.points:
        summary = outcome.summaries[point.key]
        results[point.config.algorithm] = summary
        print(summary_line(summary, out / point.folder))
    markdown, csv_text = compare_table(results)
    (out / "compare.md").write_text(markdown, encoding="utf-8")
    (out / "compare.csv").write_text(csv_text, encoding="utf-8")
    print()
    print(markdown)
    return 1 if outcome.failed else 0


def register(sub) -> None:
    parser = sub.add_parser("compare", help="run several algorithms on identical clients and initial models",
                            description="Every algorithm runs on the identical federation with identical initial "
                                        "models; one run folder each under --out, plus compare.md and compare.csv. "
                                        "It is a sweep: the runs go to --executor, and the same command again "
                                        "skips the finished ones.")
    parser.add_argument("--algorithms", required=True, help="comma-separated, e.g. clove,ifca,fedavg,oracle")
    add_experiment_flags(parser, skip=("algorithm",))
    parser.add_argument("--out", required=True, help="folder for the run folders and the tables")
    add_executor_flags(parser)
    parser.set_defaults(func=run)
