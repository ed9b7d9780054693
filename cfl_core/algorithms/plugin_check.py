"""What an algorithm from a plugin must be before it is registered (the static part of the contract).

The running part (every valid combination trains, checkpoints and resumes identically) is the contract
test suite, which runs over every registered algorithm, plugins included (tests/test_algorithm_contract.py).
"""
from __future__ import annotations

import dataclasses
import inspect

from ..registry import PluginRefused, check_plugin_name
from ..settings import settings_of
from .base import Algorithm, AlgorithmOptions

FLAGS = ("needs_models", "uses_init_mode", "has_loss_vectors", "one_model_per_client", "has_clusters", "needs_labels")


def admit_algorithm(entry_name: str, obj) -> type[Algorithm]:
    if not (isinstance(obj, type) and issubclass(obj, Algorithm)):
        raise PluginRefused(f"it is {obj!r}, not a subclass of cfl_core.Algorithm")
    check_plugin_name(entry_name, obj.name)
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(obj.__abstractmethods__))
        raise PluginRefused(f"{obj.__name__} does not implement {missing}")
    for attribute in ("label", "summary"):
        if not isinstance(getattr(obj, attribute), str) or (attribute == "label" and not obj.label.strip()):
            raise PluginRefused(f"{obj.__name__}.{attribute} must be a text (what the dashboard and --help show)")
    for flag in FLAGS:
        if not isinstance(getattr(obj, flag), bool):
            raise PluginRefused(f"{obj.__name__}.{flag} must be True or False")
    options = obj.Options
    if not (isinstance(options, type) and issubclass(options, AlgorithmOptions) and dataclasses.is_dataclass(options)):
        raise PluginRefused(f"{obj.__name__}.Options must be a frozen dataclass deriving from AlgorithmOptions")
    undeclared = [f.name for f in dataclasses.fields(options) if f.name not in settings_of(options)]
    if undeclared:
        raise PluginRefused(f"option {undeclared[0]!r} is not declared with setting(...): the CLI, the widgets "
                            "and validation read its declaration")
    try:
        obj.parse_options({})
    except Exception as exc:  # noqa: BLE001
        raise PluginRefused(f"its options' defaults are refused by their own declarations ({exc})") from None
    return obj
