"""Command-line flags generated from declared settings (one flag per setting), and KEY=VALUE lists."""
from __future__ import annotations

import argparse

from ..errors import ConfigError


def add_setting_flags(parser: argparse.ArgumentParser, settings, skip: tuple[str, ...] = (),
                      required: tuple[str, ...] = ()) -> None:
    """One flag per declared setting: its name, help, default and allowed values come from the declaration.

    Values stay text here and are coerced by the setting itself (`from_dict(..., text=True)`), so a bad value
    gets the same one-line message as in a config file or a link.
    """
    for s in settings.values():
        if not s.flag or s.name in skip:
            continue
        default = s.to_text(s.default) if s.default is not None else s.none_means
        metavar = {bool: "{true,false}", int: "N", float: "X"}.get(s.kind, "NAME")
        parser.add_argument(s.flag_name, dest=s.name, default=None, metavar=metavar,
                            required=s.name in required,
                            help=f"{s.help}: {s.describe()} (default: {default})")


def key_values(items: list[str], flag: str) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(flag, item, "KEY=VALUE")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out
