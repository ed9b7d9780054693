"""`python -m cfl_core compare`: several algorithms on the identical federation and initial models."""
from __future__ import annotations

from ..compare import compare_table, comparison_configs, run_comparison
from ..errors import ConfigError
from .flags import out_folder
from .run_cmd import ProgressBar, add_experiment_flags, config_from_args, summary_line


def run(args) -> int:
    names = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    if not names:
        raise ConfigError("algorithms", args.algorithms, "a comma-separated list such as clove,ifca,fedavg,oracle")
    base = config_from_args(args, validate=False, algorithm=names[0])
    comparison_configs(base, names)  # every algorithm's config refused before anything is written
    out = out_folder(args.out, overwrite=args.overwrite)

    def progress(name, record):
        bars.setdefault(name, ProgressBar(base.rounds, f"{name:>8}")).update(record)

    bars: dict = {}
    results = run_comparison(base, names, out, on_round=progress, overwrite=args.overwrite)
    for name, summary in results.items():
        print(summary_line(summary, out / name))
    markdown, csv_text = compare_table(results)
    (out / "compare.md").write_text(markdown, encoding="utf-8")
    (out / "compare.csv").write_text(csv_text, encoding="utf-8")
    print()
    print(markdown)
    return 0


def register(sub) -> None:
    parser = sub.add_parser("compare", help="run several algorithms on identical clients and initial models",
                            description="Every algorithm runs on the identical federation with identical initial "
                                        "models; one run folder each under --out, plus compare.md and compare.csv.")
    parser.add_argument("--algorithms", required=True, help="comma-separated, e.g. clove,ifca,fedavg,oracle")
    add_experiment_flags(parser, skip=("algorithm",))
    parser.add_argument("--out", required=True, help="folder for the run folders and the tables (new or empty)")
    parser.add_argument("--overwrite", action="store_true", help="replace the comparison already in --out")
    parser.set_defaults(func=run)
