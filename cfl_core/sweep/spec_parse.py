"""A sweep spec read and checked: its keys, base, axes (grid, zip, cases) and options typed by their declarations.

`parse_spec(data)` gives SweepSpec's fields (cfl_core.sweep.spec builds the SweepSpec and expands it into points);
every problem is a ConfigError that names where it is in the spec.
"""
from __future__ import annotations

import json
import re

from ..config import ExperimentConfig
from ..errors import ConfigError
from ..settings import parse, settings_of

PROFILE = "profile"  # base/grid/zip/cases: the paper's or the authors' code's settings (as the CLI's --profile)
SPEC_KEYS = ("name", "description", "base", "grid", "zip", "cases", "options", "folder")
OPTION_PREFIXES = ("options.", "shift_options.")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")  # a folder template's {field}


def typed_given(parsed, given: dict) -> dict:
    """The given option names with their typed values (defaults stay implicit, as the CLI writes them)."""
    return {k: getattr(parsed, k) for k in given}


def check_template(template) -> None:
    if not isinstance(template, str) or not template.strip("/"):
        raise ConfigError("folder", template, "a text such as \"{partition}/seed{seed}/{algorithm}\"")
    declared = settings_of(ExperimentConfig)
    for name in PLACEHOLDER.findall(template):
        head = name.split(".")[0]
        if name != "key" and (head not in declared or ("." in name and head not in ("options", "shift_options"))):
            raise ConfigError("folder", template, f"placeholders among {{key}}, the config fields "
                                                  f"({', '.join(declared)}) and {{options.NAME}}")
    if any(part in ("", ".", "..") for part in template.split("/")):
        raise ConfigError("folder", template, "a relative path without empty, '.' or '..' parts")


# -- parsing the spec --------------------------------------------------------------------------------------------------
def _typed(name: str, value, where: str):
    """A config field's value through its declared setting (type and allowed values); error names `where`.
    `profile` is the one name that is not a field: a profile (cfl_core.profiles), or null for none."""
    if name == PROFILE:
        from ..profiles import check_profile

        return None if value is None else check_profile(value, where)
    declared = settings_of(ExperimentConfig)
    if name not in declared:
        raise ConfigError(where, value, "a field of the experiment config (" + ", ".join(declared) + ")")
    s = declared[name]
    out = s.coerce(value, name=where)
    s.check(out, name=where)
    return out


def _option_setting(name: str, where: str, algorithms: set[str], shifts: set[str]):
    """The declared setting of a swept `options.NAME` / `shift_options.NAME` (by an algorithm or shift of the sweep)."""
    from ..algorithms import ALGORITHMS
    from ..dynamics import SHIFTS

    head, _, option = name.partition(".")
    owners = ([(a, ALGORITHMS[a].Options) for a in sorted(algorithms)] if head == "options" else
              [(s, SHIFTS[s].Options) for s in sorted(shifts) if SHIFTS.get(s) is not None])
    for _, options_cls in owners:
        if option in settings_of(options_cls):
            return settings_of(options_cls)[option]
    names = sorted({o for _, cls in owners for o in settings_of(cls)})
    whose = "the sweep's algorithms" if head == "options" else "the sweep's shifts"
    raise ConfigError(where, name, f"an option of {whose} ({', '.join(names) or 'none'})")


def _list(value, where: str) -> list:
    if not isinstance(value, list) or not value:
        raise ConfigError(where, value, "a non-empty list of values")
    return value


def parse_spec(data: dict) -> dict:
    """A spec's data checked and typed: SweepSpec's fields (raw, name, description, base, axes, swept, options,
    folder). Every problem is a ConfigError naming where it is (`grid.lr`, `cases[2].seed`, `options.cfl.eps1`)."""
    name, description = _header(data)
    base = _base(data)
    raw_axes = _raw_axes_of(data)
    algorithms, shifts = _sweep_algorithms(base, raw_axes)
    axes = [_typed_axis(where, axis, algorithms, shifts) for where, axis in raw_axes]
    _check_base_options(base, algorithms)
    options = _per_algorithm_options(data)
    template = data.get("folder")
    if template is not None:
        check_template(template)
    swept = list(dict.fromkeys(k for axis in axes for part in axis for k in part))
    return dict(raw=data, name=name, description=description, base=base, axes=axes, swept=swept, options=options,
                folder=template)


def _header(data) -> tuple[str, str]:
    """The spec's keys checked; its name (a folder name) and description."""
    if not isinstance(data, dict):
        raise ConfigError("spec", data, "an object with keys among " + ", ".join(SPEC_KEYS))
    for key in data:
        if key not in SPEC_KEYS:
            raise ConfigError(key, data[key], "a key of a sweep spec (" + ", ".join(SPEC_KEYS) + ")")
    spec_name = data.get("name") or "sweep"
    if not isinstance(spec_name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,80}", spec_name):
        raise ConfigError("name", spec_name, "letters, digits, '-', '_' and '.' (a folder name)")
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise ConfigError("description", description, "a text")
    return spec_name, description


def _base(data: dict) -> dict:
    raw_base = data.get("base") or {}
    if not isinstance(raw_base, dict):
        raise ConfigError("base", raw_base, "an object of experiment config fields")
    return {k: _typed(k, v, f"base.{k}") for k, v in raw_base.items()}


def _raw_axes_of(data: dict) -> list[tuple[str, list[dict]]]:
    """The axes of grid, zip and cases in the spec's order, values untyped (typed once the sweep's algorithms are
    known), each name swept by one axis only."""
    raw_axes: list[tuple[str, list[dict]]] = []  # (where, [partial configs with untyped values])
    for section in [k for k in data if k in ("grid", "zip", "cases")]:
        raw_axes.extend(_raw_axes(section, data[section]))
    if not raw_axes:
        raise ConfigError("grid", data.get("grid") or None, "at least one swept field (in grid, zip or cases)")
    owner: dict[str, str] = {}
    for where, axis in raw_axes:
        for name in dict.fromkeys(k for part in axis for k in part):
            if name in owner and owner[name] != where:
                raise ConfigError(f"{where}.{name}" if where == "cases" else where, name,
                                  f"a field swept in one place only ({name} is also in {owner[name]})")
            owner[name] = where
    return raw_axes


def _sweep_algorithms(base: dict, raw_axes) -> tuple[set, set]:
    """The algorithms and shifts the sweep's points use (what its option names are checked against)."""
    def typed_or_default(name, value, where):
        return _typed(name, value, where) if name in settings_of(ExperimentConfig) else value

    def always_swept(name):  # then the base value (or the default) is used by no point
        return any(all(name in part for part in axis) for _, axis in raw_axes)

    algorithms = set() if always_swept("algorithm") else {base.get("algorithm", ExperimentConfig.algorithm)}
    shifts = set() if always_swept("shift") else {base.get("shift", ExperimentConfig.shift)}
    for where, axis in raw_axes:
        for i, part in enumerate(axis):
            if "algorithm" in part:
                algorithms.add(typed_or_default("algorithm", part["algorithm"], _where(where, "algorithm", i)))
            if "shift" in part:
                shifts.add(typed_or_default("shift", part["shift"], _where(where, "shift", i)))
    return algorithms, shifts


def _typed_axis(where: str, axis: list[dict], algorithms: set, shifts: set) -> list[dict]:
    """One axis's values through their declarations (options through the sweep's algorithms' or shifts')."""
    typed_axis = []
    for i, part in enumerate(axis):
        typed_part = {}
        for name, value in part.items():
            at = _where(where, name, i)
            if name.startswith(OPTION_PREFIXES):
                s = _option_setting(name, at, algorithms, shifts)
                typed_part[name] = s.coerce(value, name=at)
                s.check(typed_part[name], name=at)
            else:
                typed_part[name] = _typed(name, value, at)
        typed_axis.append(typed_part)
    if where.startswith("grid."):
        seen = [json.dumps(p, sort_keys=True, default=str) for p in typed_axis]
        if len(set(seen)) != len(seen):
            raise ConfigError(where, [next(iter(p.values())) for p in typed_axis], "a list without repeats")
    return typed_axis


def _check_base_options(base: dict, algorithms: set) -> None:
    """Each of the base's options reaches at least one of the sweep's algorithms."""
    from ..algorithms import ALGORITHMS

    for option in base.get("options", {}):
        if not any(option in settings_of(ALGORITHMS[a].Options) for a in algorithms):
            names = sorted({o for a in algorithms for o in settings_of(ALGORITHMS[a].Options)})
            raise ConfigError(f"base.options.{option}", base["options"][option],
                              f"an option of the sweep's algorithms ({', '.join(names) or 'none'})")


def _per_algorithm_options(data: dict) -> dict:
    """`options`: per algorithm, its fixed options through its declared Options."""
    from ..algorithms import ALGORITHMS

    per_algo = data.get("options") or {}
    if not isinstance(per_algo, dict):
        raise ConfigError("options", per_algo, "an object of algorithm: {option: value}")
    options = {}
    for algo, raw in per_algo.items():
        if algo not in ALGORITHMS:
            raise ConfigError(f"options.{algo}", raw, "options keyed by an algorithm (" + ", ".join(ALGORITHMS) + ")")
        parsed = parse(ALGORITHMS[algo].Options, raw, prefix=f"options.{algo}.",
                       what="an option of this algorithm", owner=algo)
        options[algo] = typed_given(parsed, raw or {})
    return options


def _where(axis: str, name: str, i: int) -> str:
    if axis.startswith("grid."):
        return f"{axis}[{i}]"
    if axis == "cases":
        return f"cases[{i}].{name}"
    return f"{axis}.{name}[{i}]"


def _raw_axes(section: str, value) -> list[tuple[str, list[dict]]]:
    """The axes of one of grid, zip and cases: (where, the partial configs it takes in turn) each."""
    out = []
    if section == "grid":
        if not isinstance(value, dict):
            raise ConfigError("grid", value, "an object of field: [values]")
        for name, values in value.items():
            values = _list(values, f"grid.{name}")
            out.append((f"grid.{name}", [{name: v} for v in values]))
    elif section == "zip":
        if not isinstance(value, list):
            raise ConfigError("zip", value, "a list of groups, each an object of field: [values] of one length")
        for g, group in enumerate(value):
            if not isinstance(group, dict) or not group:
                raise ConfigError(f"zip[{g}]", group, "an object of field: [values], all lists of one length")
            lists = {name: _list(values, f"zip[{g}].{name}") for name, values in group.items()}
            first = next(iter(lists))
            for name, values in lists.items():
                if len(values) != len(lists[first]):
                    raise ConfigError(f"zip[{g}].{name}", values,
                                      f"a list of {len(lists[first])} values, as long as zip[{g}].{first}")
            out.append((f"zip[{g}]", [{n: lists[n][i] for n in lists} for i in range(len(lists[first]))]))
    else:
        if not isinstance(value, list):
            raise ConfigError("cases", value, "a list of objects of config fields")
        for c, case in enumerate(value):
            if not isinstance(case, dict) or not case:
                raise ConfigError(f"cases[{c}]", case, "a non-empty object of config fields")
        if value:
            out.append(("cases", [dict(case) for case in value]))
    return out
