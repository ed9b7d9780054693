"""Settings as data: each setting is declared once, and validation, coercion, CLI flags, URL keys and widgets read it.

A setting is a dataclass field declared with `setting(...)`:

    rounds: int = setting(20, Interval(1, 100_000), label="Rounds", help="communication rounds")

The declaration holds the type (from the annotation), the default, the allowed
values (`Choice` or `Interval`), a short label, a one-line help and layout hints.
`settings_of(cls)` lists a class's settings; `parse(cls, raw)` builds an
instance from a dict with one coercer for every source (typed JSON values, or
the text of a CLI flag or a URL parameter); `check_values(obj)` validates an
instance field by field. Rules that involve several fields stay explicit code
next to the dataclass (its `check`/`validate`). In the spirit of
scikit-learn's `_parameter_constraints`: constraints are data, one validator.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import numbers
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .errors import ConfigError
from .jsonio import JSONTooDeep, loads_bounded

METADATA_KEY = "cfl_setting"


# -- constraints ----------------------------------------------------------------------------------
class Choice:
    """One of a fixed list of values; the list may come from a registry (a callable read when needed)."""

    def __init__(self, values: Iterable | Callable[[], Iterable]):
        self._values = values

    @property
    def values(self) -> tuple:
        return tuple(self._values() if callable(self._values) else self._values)

    def allows(self, value) -> bool:
        return value in self.values

    def describe(self, kind: type) -> str:
        return "one of " + ", ".join(str(v) for v in self.values)


class Interval:
    """A finite number between bounds (either may be open or missing)."""

    def __init__(self, low: float | None = None, high: float | None = None, *,
                 low_open: bool = False, high_open: bool = False):
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open

    def allows(self, value) -> bool:
        if not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            return False
        return True

    def describe(self, kind: type) -> str:
        noun = "a whole number" if kind is int else "a number"
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"{noun} in {left}{_num(self.low)}, {_num(self.high)}{right}"
        if self.low is not None:
            return f"{noun} {'>' if self.low_open else '>='} {_num(self.low)}"
        if self.high is not None:
            return f"{noun} {'<' if self.high_open else '<='} {_num(self.high)}"
        return "a finite number" if kind is float else noun


def _num(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


# -- the declaration -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Setting:
    name: str
    kind: type  # bool, int, float, str or dict
    default: Any
    optional: bool  # None is a valid value (its meaning: `none_means`)
    allowed: Choice | Interval | None
    label: str
    help: str
    advanced: bool = False  # shown under "More settings" in the dashboard
    group: str = ""  # where the dashboard places it (data, algorithm, training, dynamics, run)
    step: float | None = None  # widget step for floats
    none_means: str = "none"  # what an empty value means, for help texts and widgets
    allowed_text: str | None = None  # a better wording of the allowed values than the generated one
    flag: bool = True  # False: not a CLI flag / widget of its own (e.g. dicts edited elsewhere)
    list_as_text: bool = False  # a text setting holding a comma-separated list: a JSON list is joined into it

    # -- what is allowed ------------------------------------------------------------------------
    def describe(self) -> str:
        if self.allowed_text:
            return self.allowed_text
        if self.allowed is not None:
            text = self.allowed.describe(self.kind)
        else:
            text = {bool: "true or false", int: "a whole number", float: "a finite number", str: "a text",
                    dict: "a JSON object"}.get(self.kind, self.kind.__name__)
        return text + (f" (or none: {self.none_means})" if self.optional and self.none_means != "none" else
                       " (or none)" if self.optional else "")

    @property
    def choices(self) -> tuple | None:
        return self.allowed.values if isinstance(self.allowed, Choice) else None

    # -- one coercer ------------------------------------------------------------------------------
    def coerce(self, value, *, text: bool = False, name: str | None = None):
        """The value as this setting's type, or ConfigError naming it.

        `text=True`: the value is the text of a CLI flag or URL parameter ("none"
        for an empty optional value, booleans exactly true/false, dicts as JSON).
        Otherwise it is a typed value (Python or JSON): strings are never read as
        numbers or booleans there, so `"false"` in a config file is refused, not true.
        """
        name = name or self.name
        try:
            out = self._coerce(value, text)
        except JSONTooDeep as exc:  # say why: the text may look like the JSON object it should be
            raise ConfigError(name, value, f"{self.describe()}: {exc}") from None
        except (TypeError, ValueError, OverflowError, json.JSONDecodeError):
            raise ConfigError(name, value, self.describe()) from None
        return out

    def _coerce(self, value, text: bool):
        if text and isinstance(value, str):
            stripped = value.strip()
            if self.optional and stripped.lower() in ("", "none", "null"):
                return None
            value = _from_text(self.kind, stripped)
        if value is None:
            if self.optional:
                return None
            raise ValueError("none")
        kind = self.kind
        if kind is bool:
            if isinstance(value, bool):
                return value
            raise TypeError
        if isinstance(value, bool):
            raise TypeError  # True is not the number 1 here
        if kind is int:
            if isinstance(value, numbers.Integral):
                return int(value)
            if isinstance(value, numbers.Real) and float(value).is_integer():
                return int(value)
            raise TypeError
        if kind is float:
            if isinstance(value, numbers.Real):
                return float(value)
            raise TypeError
        if kind is str:
            if isinstance(value, str):
                return value
            if self.list_as_text and isinstance(value, (list, tuple)) and all(
                    isinstance(v, (str, numbers.Real)) and not isinstance(v, bool) for v in value):
                return ",".join(str(v) for v in value)
            raise TypeError
        if kind is dict:
            if isinstance(value, dict):
                return value
            raise TypeError
        raise TypeError

    def check(self, value, *, name: str | None = None) -> None:
        """ConfigError unless `value` already has this setting's type and is allowed."""
        name = name or self.name
        if value is None and self.optional:
            return
        if self._coerce_or_none(value) is _BAD or (self.kind is int and not isinstance(value, numbers.Integral)):
            raise ConfigError(name, value, self.describe())
        if self.allowed is not None and not self.allowed.allows(value):
            raise ConfigError(name, value, self.describe())

    def _coerce_or_none(self, value):
        try:
            return self._coerce(value, False)
        except (TypeError, ValueError, OverflowError):
            return _BAD

    # -- text form (CLI, URL) ----------------------------------------------------------------------
    def to_text(self, value) -> str:
        if value is None:
            return "none"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, dict):
            return json.dumps(value, separators=(",", ":"), sort_keys=True)
        if isinstance(value, float):
            return repr(value)
        return str(value)

    @property
    def flag_name(self) -> str:
        return "--" + self.name.replace("_", "-")


_BAD = object()


def _from_text(kind: type, text: str):
    if kind is bool:
        lowered = text.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise ValueError(text)
    if kind is int:
        try:
            return int(text)
        except ValueError:
            value = float(text)  # "1e3" and "3.0" are whole numbers too
            if not math.isfinite(value) or not value.is_integer():
                raise
            return int(value)
    if kind is float:
        return float(text)
    if kind is dict:
        return loads_bounded(text or "{}")  # a depth or length past the bounds is a ValueError: ConfigError
    return text


def setting(default, allowed: Choice | Interval | None = None, *, label: str, help: str = "", **hints):
    """A dataclass field carrying its Setting declaration (the name and type are filled in from the class)."""
    spec = dict(default=default, allowed=allowed, label=label, help=help, **hints)
    metadata = {METADATA_KEY: spec}
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _plain(hint) -> tuple[type, bool]:
    """(the plain type, whether None is allowed) of an annotation such as `int | None`."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return _plain(args[0])[0], len(args) < len(typing.get_args(hint))
    origin = typing.get_origin(hint)
    return (origin or hint), False


@functools.lru_cache(maxsize=None)
def settings_of(cls) -> dict[str, Setting]:
    """Every declared setting of a dataclass, in declaration order (inherited ones first)."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        spec = f.metadata.get(METADATA_KEY)
        if spec is None:
            continue
        kind, optional = _plain(hints[f.name])
        out[f.name] = Setting(name=f.name, kind=kind, optional=optional, **spec)
    return out


def parse(cls, raw: Mapping[str, Any] | None, *, text: bool = False, prefix: str = "",
          what: str = "a setting", owner: str = "it"):
    """An instance of `cls` from a dict, each value coerced by its setting; unknown names are refused.

    Values are coerced and then checked against their allowed values, so the
    error names `prefix + name`. Cross-field rules are the caller's (cls.check).
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(prefix.rstrip(".") or "settings", raw, "an object of name: value pairs")
    declared = settings_of(cls)
    values = {}
    for key, value in raw.items():
        if key not in declared:
            allowed = ", ".join(sorted(declared)) or f"none for {owner}"
            raise ConfigError(f"{prefix}{key}", value, f"{what} ({allowed})")
        s = declared[key]
        coerced = s.coerce(value, text=text, name=f"{prefix}{key}")
        s.check(coerced, name=f"{prefix}{key}")
        values[key] = coerced
    return cls(**values)


def check_values(obj, prefix: str = "", names: Iterable[str] | None = None) -> None:
    """ConfigError for the first declared field (in declaration order) whose value is not allowed."""
    declared = settings_of(type(obj))
    for name in names if names is not None else declared:
        declared[name].check(getattr(obj, name), name=f"{prefix}{name}")


def declared_copy(source_cls, name: str, **changes):
    """A field declared exactly as `source_cls.name` (one declaration shared by two dataclasses)."""
    f = next(f for f in dataclasses.fields(source_cls) if f.name == name)
    spec = {**f.metadata[METADATA_KEY], **changes}
    return setting(**spec)
