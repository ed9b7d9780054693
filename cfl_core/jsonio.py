"""Writing and reading the small JSON files of run folders: one atomic writer for the core and the dashboard."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

_UMASK = os.umask(0o022)  # read once (setting it back at once): new files get the mode the user's umask gives
os.umask(_UMASK)


def write_json_atomic(path: str | os.PathLike, data: Any, *, default: Callable[[Any], Any] | None = None) -> None:
    """Write data as sorted, indented JSON to path, atomically: readers never see half a file.

    The text goes to a new hidden `.NAME.*.tmp` beside the target first, then replaces it in one
    rename. default: as json.dumps's (None refuses what JSON cannot hold). The folder must exist.
    """
    write_text_atomic(path, json.dumps(data, sort_keys=True, indent=1, default=default))


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write text to path in one rename: readers never see half a file. The temporary file is a new one of a
    name no one chose (O_EXCL): whatever else lies beside the target (a named pipe a writer would wait on for
    ever, a link to elsewhere) is never opened."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # as an ordinary new file (mkstemp makes it 0600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_json(path: str | os.PathLike) -> Any:
    """The JSON in path, or None when it is missing, unreadable, not a regular file (a named pipe is never
    waited on), over cfl_core.files.JSON_LIMIT, or not JSON (never raises for those)."""
    from .files import read_text

    text, _ = read_text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None


MAX_DEPTH = 16  # JSON a setting holds (options, shift options, per-algorithm options) nests 1-2 levels
MAX_CHARS = 100_000


class JSONTooDeep(ValueError):
    """JSON text nested deeper, or longer, than a setting may be (refused before it is parsed)."""


def loads_bounded(text: str, *, max_depth: int = MAX_DEPTH, max_chars: int = MAX_CHARS) -> Any:
    """json.loads for text from outside (a URL parameter, a CLI flag): refuses, with a ValueError saying why,
    text longer than `max_chars` or nested deeper than `max_depth` before parsing it (json.loads of
    100,000 nested brackets raises RecursionError, which crashed the pages that decoded a link)."""
    if len(text) > max_chars:
        raise JSONTooDeep(f"JSON of at most {max_chars:,} characters (this is {len(text):,})")
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                raise JSONTooDeep(f"JSON nested at most {max_depth} levels deep")
        elif ch in "]}":
            depth -= 1
    return json.loads(text)
