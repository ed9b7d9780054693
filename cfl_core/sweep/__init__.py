"""Sweeps: a grid of experiment configs, a stable key per point, run by an executor (a local process
pool, Ray locally or on a cluster, or serially) and written by the driver into one sweep folder.

    from cfl_core.sweep import SweepSpec, run_sweep
    outcome = run_sweep(SweepSpec.from_file("sweeps/digits-core.yaml"), "runs/sweeps/digits-core")

`python -m cfl_core sweep SPEC --out FOLDER` is the same from the command line.
"""
from .runner import InvalidPoints, Progress, SweepOutcome, plan, run_sweep
from .spec import DEFAULT_MAX_POINTS, Point, SweepSpec, point_key, read_spec_file

__all__ = ["DEFAULT_MAX_POINTS", "InvalidPoints", "Point", "Progress", "SweepOutcome", "SweepSpec", "plan",
           "point_key", "read_spec_file", "run_sweep"]
