"""The form's state: every declared setting as a control field, and the values the controls hold in st.session_state.

Each control's value lives under `<prefix>.<field>` (an algorithm's option under
`<prefix>.opt.<algorithm>.<option>`); `values(prefix)` turns them back into the
config dict a page builds and validates. The fields are generated from the
settings' declarations (cfl_core.settings): a setting declared there gets its
field, its label and help, and its place in the sidebar by itself.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import streamlit as st

from cfl_core.jsonio import loads_bounded

from .presets import DEFAULT_PRESET, preset_config
from .session import shared_config


@dataclass(frozen=True)
class Field:
    """How a declared setting shows as a widget (everything but `kind` comes from the declaration)."""

    name: str
    label: str
    kind: str  # int | float | optint | select | bool | json
    help: str = ""
    step: float | None = None
    fmt: str | None = None


def _widget_kind(s) -> str:
    if s.choices is not None:
        return "select"
    if s.kind is bool:
        return "bool"
    if s.kind is int:
        return "optint" if s.optional else "int"
    if s.kind is float:
        return "float"
    return "json" if s.kind is dict else "text"


def settings() -> dict:
    """The experiment's declared settings (cfl_core.settings), in declaration order."""
    from cfl_core.config import ExperimentConfig
    from cfl_core.settings import settings_of

    return settings_of(ExperimentConfig)


def help_text(s) -> str:
    """A declaration's one-line help as a sentence."""
    return s.help[:1].upper() + s.help[1:] + "." if s.help else ""


def choices(name: str) -> list:
    """The values a select field offers (None first when the setting is optional)."""
    s = settings()[name]
    return ([None] if s.optional else []) + list(s.choices)


FIELDS: dict[str, Field] = {
    s.name: Field(s.name, s.label, _widget_kind(s), help_text(s), s.step, "%g" if s.kind is float else None)
    for s in settings().values() if s.flag or s.kind is dict
}
# the sidebar's sections: every declared setting of a group shows there (advanced ones under "More settings")
DATA_FIELDS = tuple(s.name for s in settings().values() if s.group == "data" and not s.advanced)
ADVANCED_DATA = tuple(s.name for s in settings().values() if s.group == "data" and s.advanced)
TRAIN_FIELDS = tuple(s.name for s in settings().values() if s.group == "training" and not s.advanced)
ADVANCED_TRAIN = tuple(s.name for s in settings().values() if s.group == "training" and s.advanced)
ADVANCED_DYNAMICS = tuple(s.name for s in settings().values() if s.group == "dynamics" and s.advanced)
ADVANCED_CONDITIONS = tuple(s.name for s in settings().values() if s.group == "conditions" and s.advanced)


def key(prefix: str, name: str) -> str:
    return f"{prefix}.{name}"


def option_key(prefix: str, algorithm: str, name: str) -> str:
    """Where an algorithm's option lives: each algorithm keeps its own values."""
    return key(prefix, f"opt.{algorithm}.{name}")


def default_config() -> dict:
    return preset_config(DEFAULT_PRESET)


@st.cache_data(ttl=30, show_spinner=False)
def source_status() -> dict:
    """Which data sets are installed here (and how to get the others), by name."""
    from cfl_core.data import source_status as status

    return {s.name: s for s in status()}


def algorithm_label(name: str) -> str:
    from cfl_core.algorithms import ALGORITHMS

    cls = ALGORITHMS.get(name)
    return cls.label if cls else name


def option_settings(algorithm: str) -> list:
    """The declared options (cfl_core.settings.Setting) of an algorithm, [] for an unknown one."""
    from cfl_core.algorithms import ALGORITHMS
    from cfl_core.settings import settings_of

    cls = ALGORITHMS.get(algorithm)
    return list(settings_of(cls.Options).values()) if cls is not None else []


# -- state -----------------------------------------------------------------------------
def _coerce(f: Field, value, fallback):
    """The value as its control holds it (its setting's coercer), or the fallback when it cannot be."""
    from cfl_core.errors import ConfigError

    if f.kind == "json":
        return value if isinstance(value, str) else json.dumps(value or {}, separators=(",", ":"))
    s = settings()[f.name]
    try:
        v = s.coerce(value)
        s.check(v)
    except ConfigError:
        return fallback
    return v


def apply_config(prefix: str, config: dict, *, notes: list | None = None) -> None:
    """Put a (partial) config into the controls' state; values a control cannot hold fall back to defaults."""
    defaults = default_config()
    merged = {**defaults, **{k: v for k, v in config.items() if k in defaults}}
    for name, f in FIELDS.items():
        value = merged.get(name)
        fallback = defaults.get(name)
        coerced = _coerce(f, value, fallback)
        # models=None (an algorithm without K-hat) is what the "models" switch below shows: no note
        empty_models = name == "models" and value is None
        if notes is not None and name in config and coerced != value and not (f.kind == "json") and not empty_models:
            notes.append(f"{name}={value!r} cannot be shown by its control; using {coerced!r}")
        st.session_state[key(prefix, name)] = coerced
    from cfl_core.algorithms import ALGORITHMS

    cls = ALGORITHMS.get(merged.get("algorithm"))
    uses = cls is not None and (cls.needs_models or cls.uses_init_mode)
    st.session_state[key(prefix, "models_on")] = merged.get("models") is not None and not uses
    if merged.get("models") is None:
        clusters = merged.get("clusters")
        st.session_state[key(prefix, "models")] = clusters if isinstance(clusters, int) else 4
    # algorithm options: reset to defaults, then the given ones
    given = merged.get("options") or {}
    for algo in ALGORITHMS:
        for s in option_settings(algo):
            value = given.get(s.name, s.default) if algo == merged.get("algorithm") else s.default
            st.session_state[option_key(prefix, algo, s.name)] = value


def ensure_state(prefix: str) -> None:
    """Fill any missing control value (first visit, or after Streamlit dropped an unused widget's state)."""
    base = shared_config() or default_config()
    missing = {n: base.get(n) for n in FIELDS if key(prefix, n) not in st.session_state}
    if missing:
        current = {n: st.session_state.get(key(prefix, n), base.get(n)) for n in FIELDS}
        current["options"] = base.get("options") or {}
        apply_config(prefix, {**current, **missing})


def changed_options(prefix: str, algorithm: str) -> dict:
    """An algorithm's options as its controls hold them, only those that differ from the defaults."""
    out = {}
    for s in option_settings(algorithm):
        value = st.session_state.get(option_key(prefix, algorithm, s.name), s.default)
        if value != s.default:
            out[s.name] = value
    return out


def values(prefix: str) -> dict:
    """The config dict the controls describe now (not validated)."""
    from cfl_core.algorithms import ALGORITHMS

    out = {}
    for name, f in FIELDS.items():
        v = st.session_state.get(key(prefix, name))
        if f.kind == "json":
            try:
                v = loads_bounded(v or "{}")  # typed by a visitor: bounded (deep nesting raised RecursionError)
            except ValueError:
                v = {"__invalid_json__": v}
        out[name] = v
    algo = out.get("algorithm")
    cls = ALGORITHMS.get(algo)
    if cls is not None and not (cls.needs_models or cls.uses_init_mode or st.session_state.get(key(prefix, "models_on"))):
        out["models"] = None
    out["options"] = changed_options(prefix, algo)
    return out
