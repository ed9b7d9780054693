"""Which plugins are installed, which were registered and which were left out (and why).

    from cfl_core import plugin_problems
    for problem in plugin_problems():
        print(problem.message)   # plugin 'x' (cfl_lab.algorithms: pkg.mod:X) was left out: <reason>

Reading this loads every group's plugins (cfl_core/registry.py), as the first use of a registry would.
"""
from __future__ import annotations

from . import registry
from .registry import GROUPS, PluginInfo, PluginProblem


def load_all_plugins() -> None:
    from .algorithms import ALGORITHMS
    from .data import DATA_SOURCES
    from .partition import PARTITION_HELP

    for table in (ALGORITHMS, DATA_SOURCES, PARTITION_HELP):
        len(table)  # the first use loads the group


def plugin_problems() -> list[PluginProblem]:
    """Every plugin left out, in the order they were met."""
    load_all_plugins()
    return list(registry.PROBLEMS)


def loaded_plugins() -> list[PluginInfo]:
    """Every plugin registered, by group and name."""
    load_all_plugins()
    return sorted(registry.LOADED, key=lambda p: (GROUPS.index(p.group), p.name))
