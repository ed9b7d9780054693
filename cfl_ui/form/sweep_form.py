"""The Sweeps page's start form as a sweep spec: which settings may vary, their values typed by each setting's
declaration, and the Playground's config as the base."""
from __future__ import annotations

from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_core.settings import settings_of


def sweepable_fields() -> list[str]:
    """The experiment settings a sweep from the page may vary (plain values; options are edited elsewhere)."""
    return [name for name, s in settings_of(ExperimentConfig).items() if s.kind is not dict]


def parse_values(name: str, text: str) -> list:
    """A comma-separated list of one setting's values, each coerced by its declaration (ConfigError names it)."""
    s = settings_of(ExperimentConfig)[name]
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts:
        raise ConfigError(f"grid.{name}", text, "a comma-separated list of values: " + s.describe())
    out = []
    for part in parts:
        value = s.coerce(part, text=True, name=f"grid.{name}")
        s.check(value, name=f"grid.{name}")
        out.append(value)
    return out


def form_spec(name: str, base: dict, grid_text: dict[str, str]) -> dict:
    """The spec of the start form: the Playground's config as base, the chosen fields' values as the grid."""
    grid = {field: parse_values(field, text) for field, text in grid_text.items()}
    if not grid:
        raise ConfigError("grid", None, "at least one field with values")
    shared = {k: v for k, v in base.items() if k not in grid}
    if "algorithm" in grid:
        shared.pop("models", None)  # K-hat: the true cluster count for each algorithm that needs one
        shared.pop("options", None)  # another algorithm's options would not apply
    return {"name": name, "description": "started from the dashboard", "base": shared, "grid": grid}
