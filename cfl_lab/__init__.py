"""The `cfl-lab` command: every `python -m cfl_core` subcommand plus `serve`, the dashboard (cli.py).

An installed wheel also carries the dashboard's app files here, in `cfl_lab/app/` (copied by setup.py), so
`cfl-lab serve` works from any folder. The Python API lives in `cfl_core` (see its `__init__`).
"""
