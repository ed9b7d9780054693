"""The Sweeps page's pieces: the grid heatmap, the cell table, the start form's spec, and starting a sweep.

Sweeps run outside the server's job manager: a started sweep is `python -m cfl_core sweep` in a process
of its own (its executor from CFL_SWEEP_EXECUTOR / CFL_RAY_ADDRESS, the local pool by default), writing
its folder under the runs folder; the page only reads sweep folders (cfl_core.sweep.status), so sweeps
from the command line and from the page are listed alike, and one survives a restart of the server.
"""
from __future__ import annotations

import json
import os
from html import escape
import subprocess
import sys
from pathlib import Path

import plotly.graph_objects as go

from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_core.settings import settings_of
from cfl_core.sweep.executors import cpu_count, executor_from_environment
from cfl_core.sweep.tables import GRID_MEASURES

from .figures import axis, colorscale, figure_from

ROOT = Path(__file__).resolve().parents[1]
MAX_PAGE_POINTS = 500  # a sweep started from the page (the CLI's limit is --max-points)
SPEC_FILE = "spec.json"


def measure_text(measure: str, mean, std) -> str:
    if mean is None:
        return "-"
    if measure in ("final_accuracy", "reported_accuracy", "success"):
        return f"{100 * mean:.1f}% ± {100 * (std or 0):.1f}"
    if measure == "first_round_ari_0_9":
        return f"{mean:.1f} ± {std or 0:.1f}"
    return f"{mean:.2f} ± {std or 0:.2f}"


def heatmap_figure(cells: list[dict], row: str, col: str | None, measure: str) -> go.Figure:
    """Rows x columns of the chosen fields, coloured by the measure, each cell's value written in it."""
    # plotly draws a subset of HTML in labels (links too): the values read from results.csv are escaped
    ys = list(dict.fromkeys(escape(str(c[row])) for c in cells))
    xs = list(dict.fromkeys(escape(str(c[col])) for c in cells)) if col else [GRID_MEASURES[measure]]
    z = [[None] * len(xs) for _ in ys]
    text = [[""] * len(xs) for _ in ys]
    for c in cells:
        i, j = ys.index(escape(str(c[row]))), (xs.index(escape(str(c[col]))) if col else 0)
        z[i][j] = c[measure]
        text[i][j] = measure_text(measure, c[measure], c[f"{measure}_std"]) + f"<br>({c['finished']}/{c['runs']})"
    ranged = measure in ("final_ari", "success")
    heat = dict(type="heatmap", z=z, x=xs, y=ys, text=text, texttemplate="%{text}", colorscale=colorscale("Viridis"),
                colorbar={"title": {"text": measure.replace("_", " ")}},
                hovertemplate=f"{escape(row)}=%{{y}}<br>{escape(col or '')}=%{{x}}<br>%{{text}}<extra></extra>")
    if ranged:
        heat.update(zmin=0, zmax=1)
    # plotly's default template (no house style here), as go.Figure wrote it
    return figure_from([heat], {"height": max(260, 80 + 60 * len(ys)), "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
                                "xaxis": axis(escape(col or ""), type="category"),
                                "yaxis": axis(escape(row), type="category", autorange="reversed")})


def cell_rows(cells: list[dict], by: list[str]) -> list[dict]:
    """The mean ± std table under the heatmap: one row per cell."""
    out = []
    for c in cells:
        row = {name: c[name] for name in by}
        row["runs"] = f"{c['finished']}/{c['runs']}"
        for measure, label in GRID_MEASURES.items():
            row[label] = measure_text(measure, c[measure], c[f"{measure}_std"])
        out.append(row)
    return out


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


def time_estimate(configs: list, workers: int) -> str:
    from .estimate import _duration, unit_cost

    seconds = sum(unit_cost(c)[2] for c in configs)
    return f"about {_duration(seconds / max(1, workers))} on {workers} worker{'s' if workers != 1 else ''}"


def start_sweep(spec: dict, folder: Path) -> subprocess.Popen:
    """`python -m cfl_core sweep` for this spec in a process of its own, writing `folder`."""
    executor, address = executor_from_environment()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SPEC_FILE).write_text(json.dumps(spec, indent=1), encoding="utf-8")
    command = [sys.executable, "-m", "cfl_core", "sweep", str(folder / SPEC_FILE), "--out", str(folder),
               "--executor", executor, "--max-points", str(MAX_PAGE_POINTS)]
    if address:
        command += ["--address", address]
    log = open(folder / "driver.log", "ab")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                            start_new_session=True, env=env)


def default_workers() -> int:
    return cpu_count()
