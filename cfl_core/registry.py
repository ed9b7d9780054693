"""Registries that installed packages extend: the built-ins, then the plugins of an entry-point group.

A researcher's package declares, in its pyproject.toml,

    [project.entry-points."cfl_lab.algorithms"]
    my-method = "my_package.my_method:MyMethod"

and the algorithm appears wherever the built-in ones do (CLI choices, validation, widgets, sweeps,
Compare, the contract tests), because all of them read the same registry. The groups are
`cfl_lab.algorithms` (an Algorithm subclass), `cfl_lab.datasets` (a DataSource) and
`cfl_lab.partitions` (a ClusterStructure); docs/contributing.md has a worked example.

Plugins load on the registry's first use, not at import, so a plugin module may import anything from
cfl_core. One that fails to import, or fails its group's admission check (the static part of the
contract: its class, name, options), is left out and kept in `PROBLEMS` with the reason; it never stops
the others, the command line or the dashboard. `cfl_core.plugins.plugin_problems()` lists them.
"""
from __future__ import annotations

import re
import threading
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable, Iterator

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,39}$")
GROUPS = ("cfl_lab.algorithms", "cfl_lab.datasets", "cfl_lab.partitions")


class PluginRefused(ValueError):
    """Raised by an admission check: the message says what the plugin must change."""


@dataclass(frozen=True)
class PluginProblem:
    group: str  # the entry-point group
    name: str  # the entry point's name
    value: str  # where it points (module:attribute)
    reason: str

    @property
    def message(self) -> str:
        return f"plugin {self.name!r} ({self.group}: {self.value}) was left out: {self.reason}"


@dataclass(frozen=True)
class PluginInfo:
    group: str
    name: str
    value: str
    distribution: str | None  # the installed package that declares it


PROBLEMS: list[PluginProblem] = []
LOADED: list[PluginInfo] = []


def check_plugin_name(entry_name: str, declared: str) -> None:
    """The entry point's name is the name people type; the object must declare the same one."""
    if declared != entry_name:
        raise PluginRefused(f"its name is {declared!r} but the entry point is named {entry_name!r}: make them equal")
    if not isinstance(declared, str) or not NAME_RE.match(declared):
        raise PluginRefused(f"the name {declared!r} is not usable: lower-case letters, digits, '.', '_' or '-', "
                            "at most 40 characters, starting with a letter or digit")


class Registry(MutableMapping):
    """name -> entry: the built-ins in their order, then the plugins of `group` sorted by name.

    `admit(name, obj)` returns the entry to register for a loaded entry point, or raises PluginRefused.
    A plugin never replaces a built-in or an earlier plugin of the same name."""

    def __init__(self, group: str, builtins: dict[str, Any], admit: Callable[[str, Any], Any]):
        self.group = group
        self._entries = dict(builtins)
        self._admit = admit
        self._loaded = False
        self._lock = threading.RLock()

    def _load(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            self._loaded = True  # first: an admission check may read this registry
            for entry_point in sorted(_entry_points(self.group), key=lambda ep: (ep.name, ep.value)):
                self._load_one(entry_point)

    def _load_one(self, entry_point) -> None:
        where = PluginProblem(self.group, entry_point.name, entry_point.value, "")
        if entry_point.name in self._entries:
            taken = "a built-in" if not any(p.name == entry_point.name and p.group == self.group for p in LOADED) \
                else "an earlier plugin"
            PROBLEMS.append(_with(where, f"the name {entry_point.name!r} is already taken by {taken}"))
            return
        try:
            obj = entry_point.load()
        except BaseException as exc:  # noqa: BLE001 - a plugin's import may raise anything, even SystemExit
            if isinstance(exc, KeyboardInterrupt):
                raise
            PROBLEMS.append(_with(where, f"it could not be imported ({type(exc).__name__}: {exc})"))
            return
        try:
            entry = self._admit(entry_point.name, obj)
        except PluginRefused as exc:
            PROBLEMS.append(_with(where, str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - a broken plugin's own code ran inside the check
            PROBLEMS.append(_with(where, f"its check raised {type(exc).__name__}: {exc}"))
            return
        self._entries[entry_point.name] = entry
        dist = getattr(entry_point, "dist", None)
        LOADED.append(PluginInfo(self.group, entry_point.name, entry_point.value, dist.name if dist else None))

    # -- the mapping ------------------------------------------------------------------------------
    def __getitem__(self, name):
        self._load()
        return self._entries[name]

    def __setitem__(self, name, entry) -> None:
        self._load()
        self._entries[name] = entry

    def __delitem__(self, name) -> None:
        self._load()
        del self._entries[name]

    def __iter__(self) -> Iterator:
        self._load()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self._load()
        return len(self._entries)

    def __contains__(self, name) -> bool:
        self._load()
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.group!r}, {list(self)!r})"


def _with(problem: PluginProblem, reason: str) -> PluginProblem:
    return PluginProblem(problem.group, problem.name, problem.value, reason)


def _entry_points(group: str):
    try:
        return list(metadata.entry_points(group=group))
    except Exception as exc:  # noqa: BLE001 - a damaged installed package's metadata must not stop the lab
        PROBLEMS.append(PluginProblem(group, "*", "*", f"the installed packages' entry points could not be read "
                                                       f"({type(exc).__name__}: {exc})"))
        return []


class Names(Sequence):
    """The names of a registry as a live, read-only sequence (what a tuple of its names was, plugins included)."""

    def __init__(self, registry: Registry):
        self._registry = registry

    def __getitem__(self, index):
        return tuple(self._registry)[index]

    def __len__(self) -> int:
        return len(self._registry)

    def __iter__(self) -> Iterator[str]:
        return iter(self._registry)

    def __eq__(self, other) -> bool:
        return isinstance(other, (tuple, list, Names)) and tuple(self) == tuple(other)

    __hash__ = None

    def __repr__(self) -> str:
        return repr(tuple(self))
