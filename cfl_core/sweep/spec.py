"""Sweep specs: a base config, a grid, zip groups, explicit cases and per-algorithm options.

A spec (JSON, or YAML when PyYAML is installed) is an object with these keys, all but one optional:

    name: digits-core                 # default: the file's name
    description: one line for summary.md
    base: {dataset: digits, rounds: 30}          # experiment config fields (the declared settings)
    grid:                             # every combination of these lists (in this order)
      partition: [feature-skew, concept-shift]
      algorithm: [clove, ifca]
      seed: [0, 1, 2]
    zip:                              # groups of lists that advance together: one axis per group
      - {partition: [feature-skew, label-skew-1], clusters: [4, 5]}
    cases:                            # an explicit list of partial configs: one more axis
      - {algorithm: clove}
      - {algorithm: clove, options: {sqrt_losses: true}}
    options:                          # per algorithm: its own options (validated by its Options)
      clove: {stable_rounds: 3}
    folder: "{partition}/seed{seed}/{algorithm}"  # run folder per point (default: swept values + key)

`profile` (paper | authors-code, or null for none) may stand in base, grid, zip or cases like a
field: each point gets its algorithm's profile (cfl_core/profiles.py) as the CLI's `--profile`
gives it, under the fields and options the spec sets for that point.

At least one of grid, zip and cases is needed. The fields of base, grid, zip and cases are the
experiment config's declared settings (`cfl_core/settings.py`): each value goes through its
setting's coercer and allowed values, so an error names the field (`grid.partition[2]`) and what is
allowed. Grid keys may also be `options.NAME` or `shift_options.NAME` (one algorithm or shift
option swept; it applies to the points whose algorithm declares it). Options in `base.options`
reach every algorithm that declares them, as `compare --option` does. `models` left empty is the
true cluster count for the algorithms that need K-hat (as in `compare`).

Points are the product of the axes in the spec's order (each grid field, each zip group and the
cases are one axis each; the first varies slowest). Each point's config is checked whole
(`ExperimentConfig.validate`): combinations that cannot work are reported per point before
anything runs. Points with the same full config are one point. Its key
is a hash of the point's canonical config (every field, and every option of its algorithm and
shift with defaults filled in), so the same run has the same key in any sweep.

Reading and checking a spec's data is cfl_core.sweep.spec_parse; this module expands it into points.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compare import with_default_models
from ..config import ExperimentConfig
from ..errors import ConfigError
from ..settings import settings_of
from .spec_parse import OPTION_PREFIXES, PLACEHOLDER, PROFILE, SPEC_KEYS, parse_spec, typed_given

KEY_LENGTH = 16
DEFAULT_MAX_POINTS = 1000
_PART_BAD = re.compile(r"[^A-Za-z0-9_.\-]+")


# -- reading ------------------------------------------------------------------------------------------
def read_spec_file(path: str | Path) -> dict:
    """The spec object in a .json, .yaml or .yml file (ConfigError naming `spec` when unreadable, not an object,
    or past the bounds of cfl_core.sweep.spec_file: size, nesting, values once YAML aliases are expanded)."""
    from .spec_file import read_spec_data

    path = Path(path)
    data = read_spec_data(path)
    if not isinstance(data, dict):
        raise ConfigError("spec", str(path), "an object with keys among " + ", ".join(SPEC_KEYS))
    data.setdefault("name", path.stem)
    return data


# -- the parsed spec --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """One grid point: its config, the values of the swept fields, its key and its run folder."""

    index: int
    key: str
    config: ExperimentConfig
    values: dict[str, Any]
    folder: str


@dataclass(frozen=True)
class InvalidPoint:
    index: int
    values: dict[str, Any]
    error: str


@dataclass
class Expansion:
    points: list[Point]
    invalid: list[InvalidPoint]
    duplicates: int  # combinations that gave a config another point already has

    @property
    def size(self) -> int:
        return len(self.points) + len(self.invalid) + self.duplicates

    def report(self, limit: int = 20) -> str:
        """The invalid points, one line each (at most `limit`), and the count of valid points."""
        lines = [f"point {p.index} ({describe_values(p.values)}): {p.error}" for p in self.invalid[:limit]]
        if len(self.invalid) > limit:
            lines.append(f"... and {len(self.invalid) - limit} more invalid points")
        lines.append(f"{len(self.points)} of {self.size} points are valid"
                     + (f" ({self.duplicates} duplicate combinations merged)" if self.duplicates else ""))
        return "\n".join(lines)


@dataclass
class SweepSpec:
    raw: dict  # the spec as given (written to sweep.json)
    name: str
    description: str
    base: dict[str, Any]  # typed base values
    axes: list[list[dict[str, Any]]]  # each axis: the partial configs it takes in turn
    swept: list[str]  # swept names in order (config fields, or options.NAME / shift_options.NAME)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # algorithm -> its fixed options
    folder: str | None = None

    @classmethod
    def from_dict(cls, data: dict) -> "SweepSpec":
        return cls(**parse_spec(data))

    @classmethod
    def from_file(cls, path: str | Path) -> "SweepSpec":
        try:
            data = read_spec_file(path)
        except UnicodeDecodeError as exc:  # one line naming the file, not a traceback
            raise ConfigError("spec", str(path), f"a UTF-8 text file (byte {exc.start} is not UTF-8)") from None
        except RecursionError:  # JSON or YAML nested thousands of levels deep
            raise ConfigError("spec", str(path), "a spec whose values are not nested hundreds of levels deep") \
                from None
        return cls(**parse_spec(data))

    @property
    def combinations(self) -> int:
        n = 1
        for axis in self.axes:
            n *= len(axis)
        return n

    def expand(self, max_points: int | None = DEFAULT_MAX_POINTS) -> Expansion:
        """Every point, checked; ConfigError naming `max_points` when there are more combinations than it."""
        if max_points is not None and self.combinations > max_points:
            raise ConfigError("max_points", max_points,
                              f"at least {self.combinations} points: this sweep has {self.combinations} "
                              f"combinations, over the limit of {max_points} (raise it with --max-points)")
        points, invalid, seen, duplicates = [], [], set(), 0
        for index, combo in enumerate(itertools.product(*self.axes)):
            values: dict[str, Any] = {}
            for part in combo:
                values.update(part)
            try:
                config = self._config(values)
            except ConfigError as exc:
                invalid.append(InvalidPoint(index, _applied(values, None), str(exc)))
                continue
            key = point_key(config)
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
            shown = _applied(values, config)
            points.append(Point(index, key, config, shown, ""))
        points = [dataclasses.replace(p, folder=folder_name(self.folder, p)) for p in points]
        _check_unique_folders(self.folder, points)
        return Expansion(points, invalid, duplicates)

    def _config(self, values: dict[str, Any]) -> ExperimentConfig:
        from ..algorithms import ALGORITHMS
        from ..dynamics import SHIFTS

        plain = {k: v for k, v in values.items() if not k.startswith(OPTION_PREFIXES)}
        merged = {**self.base, **plain}
        algorithm = merged.get("algorithm", ExperimentConfig.algorithm)
        shift = merged.get("shift", ExperimentConfig.shift)
        algo_cls = ALGORITHMS[algorithm]
        known = settings_of(algo_cls.Options)
        # base options reach the algorithms that declare them; then the algorithm's own; then the swept ones
        options = {k: v for k, v in self.base.get("options", {}).items() if k in known}
        options.update(self.options.get(algorithm, {}))
        options.update(plain.get("options", {}) if "options" in plain else {})
        options.update({k[len("options."):]: v for k, v in values.items()
                        if k.startswith("options.") and k[len("options."):] in known})
        shift_cls = SHIFTS.get(shift)
        shift_known = settings_of(shift_cls.Options) if shift_cls is not None else {}
        shift_options = dict(merged.get("shift_options", {}))
        shift_options.update({k[len("shift_options."):]: v for k, v in values.items()
                              if k.startswith("shift_options.") and k[len("shift_options."):] in shift_known})
        merged["options"] = typed_given(algo_cls.parse_options(options), options)
        if shift_cls is not None:
            merged["shift_options"] = typed_given(shift_cls.parse(shift_options), shift_options)
        profile = merged.pop(PROFILE, None)
        config = ExperimentConfig.from_dict(merged)
        if profile is not None:
            from ..profiles import apply_profile

            # as --profile on the command line: the fields and options the spec gives win over the profile's
            given = set(merged) - {"options", "shift_options"}
            config, _ = apply_profile(config, profile, keep=given, keep_options=set(options))
        config = with_default_models(config)
        config.validate()
        return config


def _applied(values: dict[str, Any], config: ExperimentConfig | None) -> dict[str, Any]:
    """The swept values as the point uses them: an option its algorithm does not declare is None."""
    out = {}
    for k, v in values.items():
        if config is not None and k.startswith("options."):
            v = config.options.get(k[len("options."):])
        elif config is not None and k.startswith("shift_options."):
            v = config.shift_options.get(k[len("shift_options."):])
        out[k] = v
    return out


# -- keys -----------------------------------------------------------------------------------------------------
def canonical_config(config: ExperimentConfig) -> dict[str, Any]:
    """Every field, with the algorithm's and the shift's options complete (defaults filled in)."""
    from ..algorithms import ALGORITHMS
    from ..dynamics import SHIFTS

    data = config.to_dict()
    data["options"] = dataclasses.asdict(ALGORITHMS[config.algorithm].parse_options(config.options))
    shift_cls = SHIFTS.get(config.shift)
    data["shift_options"] = dataclasses.asdict(shift_cls.parse(config.shift_options)) if shift_cls else {}
    return data


def point_key(config: ExperimentConfig) -> str:
    """The stable key of a run: a hash of its canonical config (the same run, the same key, anywhere)."""
    text = json.dumps(canonical_config(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_LENGTH]


# -- folders ------------------------------------------------------------------------------------------------------
def value_text(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{k}={value_text(v)}" for k, v in sorted(value.items())) or "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def describe_values(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={value_text(v)}" for k, v in values.items())


def _part(text: str) -> str:
    out = _PART_BAD.sub("-", text).strip("-.")
    return out[:100] or "x"


def folder_name(template: str | None, point: Point) -> str:
    """The run folder of a point, relative to the sweep folder ('/' nests)."""
    if template is None:
        parts = []
        for name, value in point.values.items():
            short = name.split(".")[-1]
            text = value_text(value)
            parts.append(text if isinstance(value, str) else f"{short}{text}")
        return _part("_".join(parts + [point.key[:8]]))
    fields = {**canonical_config(point.config), "key": point.key}

    def fill(match):
        name = match.group(1)
        if name.startswith("options.") or name.startswith("shift_options."):
            head, _, tail = name.partition(".")
            return value_text(fields[head].get(tail))
        return value_text(fields[name])

    return "/".join(_part(fill_part) for fill_part in (PLACEHOLDER.sub(fill, p) for p in template.split("/")))


def _check_unique_folders(template, points: list[Point]) -> None:
    taken: dict[str, Point] = {}
    for p in points:
        other = taken.get(p.folder)
        if other is not None:
            raise ConfigError("folder", template, f"a template that gives every point its own folder: points "
                                                  f"{other.index} and {p.index} both get {p.folder!r} "
                                                  f"(add a swept field or {{key}})")
        taken[p.folder] = p
    nested = [f for f in taken if any(f.startswith(g + "/") for g in taken)]
    if nested:
        raise ConfigError("folder", template, f"run folders that do not hold each other ({nested[0]!r})")
