"""Command-line flags generated from declared settings (one flag per setting), and KEY=VALUE lists."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

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


def out_folder(path: str | None, *, overwrite: bool = False, flag: str = "--out", empty: bool = True) -> Path:
    """The folder a command writes to, made when missing; ConfigError (one line) when it cannot be used.

    empty: refuse a folder that already holds anything (a run would mix with what is there) unless
    `overwrite`. Never an empty path: that would scatter the files into the working directory."""
    if path is None or not str(path).strip():
        raise ConfigError(flag, path or "", "a folder path (an empty one would write into the working directory)")
    folder = Path(path)
    if folder.exists() or folder.is_symlink():
        if not folder.is_dir():
            raise ConfigError(flag, path, "a folder: that path is a file")
        try:
            holds = next(os.scandir(folder), None) is not None
        except OSError as exc:
            raise ConfigError(flag, path, f"a folder that can be read ({exc.strerror})") from None
        if empty and holds and not overwrite:
            raise ConfigError(flag, path, "a new or empty folder: it already holds files (a run?); add --overwrite "
                                          "to replace the run in it, or resume it with --resume")
    else:
        try:
            folder.mkdir(parents=True)
        except OSError as exc:
            raise ConfigError(flag, path, f"a folder that can be created ({exc.strerror or type(exc).__name__})") \
                from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(flag, path, "a folder this user may write to")
    return folder
