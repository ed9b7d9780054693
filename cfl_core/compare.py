"""Several algorithms on one federation with identical initial models, and their results table."""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Callable

from .config import ExperimentConfig
from .errors import ConfigError

TABLE_COLUMNS = [
    ("algorithm", "algorithm"),
    ("final_accuracy", "final accuracy"),
    ("best_accuracy", "best accuracy"),
    ("reported_accuracy", "reported accuracy"),
    ("protocol", "protocol"),
    ("final_ari", "final ARI"),
    ("first_round_ari_0_9", "rounds to ARI>=0.9"),
    ("total_mb", "MB sent"),
    ("total_seconds", "time (s)"),
    ("status", "status"),
]


def with_default_models(config: ExperimentConfig) -> ExperimentConfig:
    """K-hat = the true cluster count when it is not given and the algorithm needs one (compare's and sweeps' rule)."""
    from .algorithms import ALGORITHMS

    algo = ALGORITHMS.get(config.algorithm)
    if config.models is None and algo is not None and algo.needs_models:
        return config.replace(models=config.clusters)
    return config


def comparison_configs(base: ExperimentConfig, algorithms: list[str],
                       options: dict[str, dict] | None = None, profile: tuple | None = None,
                       notes: list[str] | None = None) -> list[ExperimentConfig]:
    """One config per algorithm; K-hat defaults to the true cluster count where an algorithm needs one.

    `options` (algorithm -> its options) gives each algorithm settings of its own; an algorithm
    not in it gets those of `base.options` it knows (the CLI's `--option` applies to every
    algorithm that has that option, e.g. FlexCFL's and FedGroup's shared cold start).
    `profile` = (name, fields given, option keys given) applies `profiles.apply_profile` per
    algorithm (never to `rounds`: one round count for every algorithm); its notes go to `notes`.
    """
    from .algorithms import ALGORITHMS

    if len(set(algorithms)) != len(algorithms):
        raise ConfigError("algorithms", ",".join(algorithms), "each algorithm once")
    configs = []
    for name in algorithms:
        if name not in ALGORITHMS:
            raise ConfigError("algorithms", name, f"names from {sorted(ALGORITHMS)}")
        # Options are per algorithm: keep only those the algorithm knows.
        if options is not None and name in options:
            own = dict(options[name])
        else:
            known = {f for f in ALGORITHMS[name].Options.__dataclass_fields__}
            own = {k: v for k, v in base.options.items() if k in known}
        cfg = with_default_models(base.replace(algorithm=name, options=own))
        if profile is not None:
            from .profiles import apply_profile

            known = {f for f in ALGORITHMS[name].Options.__dataclass_fields__}
            cfg, note = apply_profile(cfg, profile[0], keep=set(profile[1]) | {"rounds"},
                                      keep_options={k for k in profile[2] if k in known})
            if notes is not None:
                notes.append(note)
        cfg.validate()
        configs.append(cfg)
    return configs


def run_comparison(base: ExperimentConfig, algorithms: list[str], out: str | Path | None,
                   on_round: Callable[[str, object], None] | None = None,
                   should_stop: Callable[[], bool] | None = None, profile: tuple | None = None,
                   overwrite: bool = False) -> dict[str, dict]:
    from .experiment import Experiment, Setup

    configs = comparison_configs(base, algorithms, profile=profile)
    setup = Setup.build(configs[0])  # identical clients for every algorithm
    results = {}
    for cfg in configs:
        folder = Path(out) / cfg.algorithm if out is not None else None
        exp = Experiment(cfg, out_dir=folder, setup=setup, overwrite=overwrite)
        callback = (lambda rec, name=cfg.algorithm: on_round(name, rec)) if on_round else None
        results[cfg.algorithm] = exp.run(on_round=callback, should_stop=should_stop)
    return results


# the measure every run's records give: protocol clove's reported accuracy is the final round's mean over clients
COMMON_PROTOCOL = "clove"
COMMON_LABEL = f"final accuracy (protocol {COMMON_PROTOCOL}, every run: ranked by it)"


def _cell(key: str, summary: dict):
    if key == "total_mb":
        return round(summary["total_bytes"] / 1e6, 3)
    value = summary.get(key)
    return round(value, 4) if isinstance(value, float) else value


def protocol_note(summaries) -> str:
    """The line that says which reporting protocol a table's "reported accuracy" column shows."""
    from .protocols import PROTOCOL_TEXT

    names = sorted({s.get("protocol") or "clove" for s in summaries})
    note = "Reported accuracy: " + "; ".join(f"protocol `{n}`, {PROTOCOL_TEXT.get(n, n)}" for n in names) + "."
    if len(names) > 1:  # unlike numbers side by side: say which column compares them
        note += (f" The runs report under different protocols: compare them by the final accuracy, protocol "
                 f"`{COMMON_PROTOCOL}`'s measure, which every run has; each run's reported accuracy follows its own "
                 "protocol and is not comparable across rows.")
    return note


def compare_table(results: dict[str, dict]) -> tuple[str, str]:
    """(markdown, csv) tables with one row per algorithm; the markdown opens with the protocol it reports.

    When the runs report under different protocols (`compare --profile`: FlexCFL's best round beside CLoVE's final
    round), one "reported accuracy" column would compare unlike numbers: the rows are then ranked by the accuracy
    every run has under the common protocol (clove), shown beside each run's own reported accuracy."""
    columns, summaries = list(TABLE_COLUMNS), list(results.values())
    note = protocol_note(summaries)
    if len({s.get("protocol") or COMMON_PROTOCOL for s in summaries}) > 1:
        keys = [key for key, _ in columns]
        columns[keys.index("final_accuracy")] = ("final_accuracy", COMMON_LABEL)
        columns[keys.index("reported_accuracy")] = ("reported_accuracy", "reported accuracy (own protocol)")
        summaries.sort(key=lambda s: -(s.get("final_accuracy") if s.get("final_accuracy") is not None else -1.0))
        note += " Rows are ranked by it."
    rows = [[_cell(key, summary) for key, _ in columns] for summary in summaries]
    header = [label for _, label in columns]
    md = [note, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join("-" if v is None else str(v) for v in row) + " |" for row in rows]
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow([key for key, _ in columns])
    writer.writerows(rows)
    return "\n".join(md) + "\n", buf.getvalue()
