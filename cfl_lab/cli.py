"""`cfl-lab`: the subcommands of `python -m cfl_core` and `serve`, which starts the dashboard.

`serve` hands every flag after it to `streamlit run` (e.g. `cfl-lab serve --server.port 8600`); it lives here,
not in cfl_core's command line, because the core never imports Streamlit.
"""
from __future__ import annotations

import sys

SERVE_HELP = ("start the dashboard (flags after `serve` go to `streamlit run`, e.g. --server.port 8600 "
              "--server.headless true); runs are written to $CFL_RUNS_DIR, else ./runs")


def register_serve(sub) -> None:
    parser = sub.add_parser("serve", help=SERVE_HELP, add_help=False,
                            description=SERVE_HELP[0].upper() + SERVE_HELP[1:] + ".")
    parser.set_defaults(func=lambda args: serve([]))


def serve(flags: list[str]) -> int:
    from cfl_ui.serve import main as serve_main

    return int(serve_main(flags) or 0)


def main(argv: list[str] | None = None) -> int:
    from cfl_core.cli import build_parser, main as core_main

    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["serve"]:
        # passed through untouched: argparse would refuse Streamlit's own flags (--server.port ...)
        if args[1:] in (["-h"], ["--help"]):
            print(f"usage: cfl-lab serve [STREAMLIT FLAGS ...]\n\n{SERVE_HELP[0].upper()}{SERVE_HELP[1:]}.")
            return 0
        return serve(args[1:])
    return core_main(args, build_parser(prog="cfl-lab", extra=(register_serve,)))
