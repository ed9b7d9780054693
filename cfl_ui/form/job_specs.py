"""What each training page submits: the configs its form describes, and the job's units and title.

Plain functions of the form's values (no session state): the Playground's run (and
the one beside it), Compare's algorithms on identical clients, and the
IFCA-initialisation grid of seeds x init modes x algorithms. Each `*_configs`
raises ConfigError naming the setting at fault.
"""
from __future__ import annotations

from cfl_core.algorithms import ALGORITHMS
from cfl_core.compare import comparison_configs
from cfl_core.config import INIT_MODES, ExperimentConfig
from cfl_core.errors import ConfigError

from .controls import algorithm_label
from ..jobs.snapshots import UnitSpec

INIT_ALGOS = [a for a, cls in ALGORITHMS.items() if cls.uses_init_mode]
MAX_SEEDS = 50


def playground_configs(values: dict, vs: str | None) -> list:
    """The validated config of the form, and of `vs` beside it (same clients, same initial models) if any."""
    cfg = ExperimentConfig.from_dict(values)
    cfg.validate()
    if vs is None:
        return [cfg]
    if vs == cfg.algorithm:
        raise ConfigError("vs", vs, "a different algorithm from the first one (or — for none)")
    return [cfg, comparison_configs(cfg, [cfg.algorithm, vs])[1]]


def playground_units(configs: list) -> tuple[list, str]:
    """One run (a single folder), or two side by side (a folder per algorithm)."""
    title = " vs ".join(algorithm_label(c.algorithm) for c in configs)
    if len(configs) == 1:
        return [UnitSpec("", configs[0], algorithm_label(configs[0].algorithm))], title
    return [UnitSpec(c.algorithm, c, algorithm_label(c.algorithm)) for c in configs], title


def compare_configs(values: dict, algorithms: list, options: dict) -> list:
    """The algorithms on the identical federation from identical initial models, each with its own options."""
    if len(algorithms) < 2:
        raise ConfigError("algorithms", ",".join(algorithms) or "(none)", "at least two algorithms to compare")
    base = ExperimentConfig.from_dict({**values, "algorithm": algorithms[0], "options": options[algorithms[0]]})
    return comparison_configs(base, algorithms, options)


def compare_units(configs: list) -> tuple[list, str]:
    units = [UnitSpec(c.algorithm, c, algorithm_label(c.algorithm)) for c in configs]
    return units, "Compare " + " · ".join(u.label for u in units)


def seeds_from_link(text) -> tuple[int | None, str | None]:
    """A link's seeds=...: (the count, None) when it is a whole number in [1, MAX_SEEDS], else (None, the note
    that refuses it, naming the value and the limit)."""
    raw = str(text).strip()
    if raw.isdigit() and 1 <= int(raw) <= MAX_SEEDS:
        return int(raw), None
    return None, (f"seeds={raw[:40]!r} in the link was refused: the number of seeds must be a whole number from 1 "
                  f"to {MAX_SEEDS}; the page keeps its own")


def init_configs(values: dict, algorithms: list, modes: list, seeds) -> list:
    """Every seed x init mode x algorithm from the form's first seed (K-hat = the true clusters when unset)."""
    if not algorithms:
        raise ConfigError("algorithms", "(none)", f"at least one of {INIT_ALGOS}")
    if not modes:
        raise ConfigError("modes", "(none)", f"at least one of {list(INIT_MODES)}")
    if not isinstance(seeds, int) or not 1 <= seeds <= MAX_SEEDS:
        raise ConfigError("seeds", seeds, f"a number of seeds in [1, {MAX_SEEDS}]")
    base = ExperimentConfig.from_dict({**values, "algorithm": algorithms[0], "options": {}})
    if base.models is None:
        base = base.replace(models=base.clusters)
    configs = []
    for seed in range(base.seed, base.seed + seeds):
        for mode in modes:
            for algo in algorithms:
                configs.append(base.replace(seed=seed, init=mode, algorithm=algo))
    checked = set()
    for cfg in configs:  # every (algorithm, mode) once, and every seed's partition once
        for k in ((cfg.algorithm, cfg.init), ("seed", cfg.seed)):
            if k not in checked:
                checked.add(k)
                cfg.validate()
    return configs


def init_units(configs: list) -> tuple[list, str]:
    units = [UnitSpec(f"s{c.seed}-{c.init}-{c.algorithm}", c,
                      f"{algorithm_label(c.algorithm)} · {c.init} · seed {c.seed}",
                      {"seed": c.seed, "init": c.init, "algorithm": c.algorithm}) for c in configs]
    return units, f"IFCA init {len({c.seed for c in configs})} seeds"
