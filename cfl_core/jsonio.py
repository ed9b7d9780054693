"""Writing and reading the small JSON files of run folders: one atomic writer for the core and the dashboard."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable


def write_json_atomic(path: str | os.PathLike, data: Any, *, default: Callable[[Any], Any] | None = None) -> None:
    """Write data as sorted, indented JSON to path, atomically: readers never see half a file.

    The text goes to a hidden `.NAME.tmp` beside the target first, then replaces it in one
    rename. default: as json.dumps's (None refuses what JSON cannot hold). The folder must exist.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True, indent=1, default=default), encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: str | os.PathLike) -> Any:
    """The JSON in path, or None when it is missing, unreadable or not JSON (never raises for those)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
