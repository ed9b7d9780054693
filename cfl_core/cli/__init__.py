"""`python -m cfl_core` — one entry point, one module per subcommand.

Each command module defines `register(subparsers)` that adds its parser and sets
`func` (a callable taking the parsed args and returning an exit code).
"""
from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import ConfigError, DataUnavailable, ResumeError

# (module name, one-line help) in the order `--help` lists them.
COMMAND_MODULES = [
    "datasets_cmd",
    "partition_cmd",
    "run_cmd",
    "compare_cmd",
    "sweep_cmd",
    "bench_cmd",
]


MAX_ERROR_CHARS = 2000  # an error that echoes a huge value (a hostile spec's) stays a readable, bounded message


def one_line(text: str) -> str:
    """An error message cut to MAX_ERROR_CHARS characters (saying how many more there were)."""
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]} ... ({len(text) - MAX_ERROR_CHARS:,} more characters)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m cfl_core",
        description="CFL Lab: clustered federated learning simulations.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{name}":
                continue  # a command not written yet
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (ConfigError, DataUnavailable, ResumeError) as exc:
        # People get one readable line, never a traceback, for requests that cannot work.
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # a folder or file the system refuses (gone, read-only, full): one line too
        text = f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else exc.strerror or str(exc)
        print(f"error: {text}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
