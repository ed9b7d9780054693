"""Sweeps started from the Sweeps page: `python -m cfl_core sweep` in a process of its own, and its time estimate.

Such sweeps run outside the server's job manager (their executor from CFL_SWEEP_EXECUTOR / CFL_RAY_ADDRESS, the
local pool by default), writing their folder under the runs folder; the page only reads sweep folders
(cfl_core.sweep.status), so sweeps from the command line and from the page are listed alike, and one survives a
restart of the server.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cfl_core.sweep.executors import cpu_count, executor_from_environment

ROOT = Path(__file__).resolve().parents[2]
MAX_PAGE_POINTS = 500  # a sweep started from the page (the CLI's limit is --max-points)
SPEC_FILE = "spec.json"


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
