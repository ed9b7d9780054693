"""Who owns a sweep folder: the same rule as runs (cfl_ui.jobs.store), read from one small file.

A sweep started in the dashboard holds `ui-sweep.json` beside the core's files: the owner id of the browser that
started it, the page it came from, its title and when. That browser lists it, stops, resumes and deletes it;
anyone with its link reads it. A sweep folder without the file was started from the command line: it belongs to
whoever runs that terminal, and every browser sees it read-only (as a CLI run). The file is read like every other
file of a folder (a regular file only, bounded, never raising): a damaged one owns nothing.
"""
from __future__ import annotations

import time
from pathlib import Path

from cfl_core import jsonio
from cfl_core.run_reader import read_json_object

SWEEP_UI_FILE = "ui-sweep.json"
SWEEP_KINDS = {"sweeps": "Sweeps page", "ifca-init": "IFCA init page", "cli": "command line"}

SWEEP_FROM_CLI = ("Read-only: this sweep was started from the command line, so it belongs to whoever runs that "
                  "terminal (stop it there; resume it with `python -m cfl_core sweep --resume DIR`).")
SWEEP_NOT_YOURS = ("Read-only: this sweep was started in another browser; a link lets you watch it, while only the "
                   "browser that started it can stop, resume or delete it.")


def read_sweep_ui(folder: str | Path) -> dict:
    """ui-sweep.json as an object ({} when there is none or it cannot be read)."""
    data, _ = read_json_object(Path(folder) / SWEEP_UI_FILE)
    return data if isinstance(data, dict) else {}


def sweep_owner(folder: str | Path) -> str:
    """The owner id recorded for a sweep folder; "" = nobody's (the command line's, or a damaged file)."""
    owner = read_sweep_ui(folder).get("owner")
    return owner if isinstance(owner, str) else ""


def sweep_kind(folder: str | Path) -> str:
    """The page that started the sweep ("sweeps", "ifca-init"), "cli" without the file."""
    kind = read_sweep_ui(folder).get("kind")
    return kind if isinstance(kind, str) and kind in SWEEP_KINDS else "cli"


def why_not_sweep_owner(owner_of: str, me: str) -> str | None:
    """None when `me` owns a sweep owned by `owner_of`, else why `me` may only read it (one line)."""
    if not owner_of:
        return SWEEP_FROM_CLI
    if owner_of != me:
        return SWEEP_NOT_YOURS
    return None


def write_sweep_ui(folder: str | Path, *, owner: str, kind: str, title: str) -> None:
    """Record the owner of a new sweep folder (an existing record is kept: a resume does not re-own it)."""
    folder = Path(folder)
    if read_sweep_ui(folder):
        return
    from cfl_core.liveness import process_identity

    folder.mkdir(parents=True, exist_ok=True)
    jsonio.write_json_atomic(folder / SWEEP_UI_FILE, {"owner": owner, "kind": kind, "title": title,
                                                      "created": time.time(), "server": process_identity()},
                             default=str)
