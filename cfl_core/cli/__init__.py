"""`python -m cfl_core` — one entry point, one module per subcommand.

Each command module defines `register(subparsers)` that adds its parser and sets
`func` (a callable taking the parsed args and returning an exit code).
"""
from __future__ import annotations

import argparse
import importlib
import signal
import sys

from ..errors import ConfigError, DataUnavailable, MissingExtra, ResumeError

# (module name, one-line help) in the order `--help` lists them.
COMMAND_MODULES = [
    "datasets_cmd",
    "partition_cmd",
    "run_cmd",
    "compare_cmd",
    "sweep_cmd",
    "bench_cmd",
    "export_cmd",
    "plugins_cmd",
]


MAX_ERROR_CHARS = 2000  # an error that echoes a huge value (a hostile spec's) stays a readable, bounded message


def one_line(text: str) -> str:
    """An error message cut to MAX_ERROR_CHARS characters (saying how many more there were)."""
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]} ... ({len(text) - MAX_ERROR_CHARS:,} more characters)"


def build_parser(prog: str = "python -m cfl_core", extra=()) -> argparse.ArgumentParser:
    """The command line; `extra`: more `register(subparsers)` callables (the `cfl-lab` command adds `serve`)."""
    parser = argparse.ArgumentParser(
        prog=prog,
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
    for register in extra:
        register(sub)
    return parser


def warn_plugin_problems() -> None:
    """One line per installed plugin that was left out: a broken plugin never stops a command."""
    from ..plugins import plugin_problems

    for problem in plugin_problems():
        print(f"warning: {problem.message}", file=sys.stderr)


def _stop(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """A `kill` (SIGTERM: a service manager, a container or a batch system stopping the job) stops a command the
    way Ctrl-C does while it runs: a run writes its summary as stopped, a sweep its tables, both keep every
    finished round. A shell's background job ignores Ctrl-C, so this is often the only clean way to stop one."""
    try:
        previous = signal.signal(signal.SIGTERM, _stop)
    except ValueError:  # not the main thread (main called from an application's worker): its signals are its own
        previous = None
    try:
        return _main(argv, parser)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None, parser: argparse.ArgumentParser | None) -> int:
    parser = parser or build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) and args.command != "plugins":
        warn_plugin_problems()
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (ConfigError, DataUnavailable, MissingExtra, ResumeError) as exc:
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
