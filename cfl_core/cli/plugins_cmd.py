"""`python -m cfl_core plugins`: the installed plugins, registered or left out (and why)."""
from __future__ import annotations

from ..plugins import loaded_plugins, plugin_problems


def show(args) -> int:
    loaded, problems = loaded_plugins(), plugin_problems()
    if not loaded and not problems:
        print("no plugins installed (entry-point groups cfl_lab.algorithms, cfl_lab.datasets, cfl_lab.partitions; "
              "see docs/contributing.md)")
    for plugin in loaded:
        where = f" from {plugin.distribution}" if plugin.distribution else ""
        print(f"{plugin.group:20} {plugin.name:20} {plugin.value}{where}")
    for problem in problems:
        print(f"{problem.group:20} {problem.name:20} LEFT OUT: {problem.reason}")
    return 1 if problems else 0


def register(sub) -> None:
    parser = sub.add_parser("plugins", help="list the installed plugins: registered, or left out and why",
                            description="List the algorithms, data sets and partitions that installed packages "
                                        "register through entry points, and those left out (exit status 1).")
    parser.set_defaults(func=show)
