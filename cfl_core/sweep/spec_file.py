"""Reading a sweep spec file as data, bounded: whatever the file holds, one line naming the problem, at once.

A spec is a few kB of JSON or YAML. A hostile one could be a named pipe (a reader would wait for
ever), gigabytes, bytes that are not UTF-8, lists nested thousands deep, or a "billion laughs":
YAML anchors whose aliases expand a 1 kB file into billions of values (it hung `sweep`, grew its
memory, and one variant wrote 2 GB of error text echoing the expanded value). So the file is read
through cfl_core.files (a regular file only, at most SPEC_LIMIT bytes), and a YAML document's
events are counted before anything is built: the value count with every alias expanded and the
nesting depth are bounded, so the document is refused before it can grow. JSON (no aliases) is
bounded the same way after parsing. Every refusal is a ConfigError naming `spec`.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import ConfigError
from ..files import read_bytes, size_text

SPEC_LIMIT = 256 * 1024  # bytes: a large real spec is a few kB
MAX_VALUES = 100_000  # values (scalars and collections) once every YAML alias is expanded
MAX_DEPTH = 32  # collections inside collections
ALLOWED = "the path of a readable sweep spec (.json, .yaml or .yml)"


def _refuse(path: Path, why: str) -> ConfigError:
    return ConfigError("spec", str(path), why)


def _yaml_bounds(text: str, path: Path) -> None:
    """Walk the YAML events (no objects built) and refuse a document that would expand past MAX_VALUES values or
    nest past MAX_DEPTH collections."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    anchors: dict[str, int] = {}  # anchor -> the count of values its node expands to
    open_nodes: list[tuple[int, str | None]] = []  # (expanded count when it opened, its anchor)
    expanded = 0

    def grow(count: int) -> None:
        nonlocal expanded
        expanded += count
        if expanded > MAX_VALUES:
            raise _refuse(path, f"a spec of at most {MAX_VALUES:,} values: it expands to more (YAML anchors and "
                                "aliases repeating a part of it?)")

    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            grow(anchors.get(event.anchor, 1))
        elif isinstance(event, yaml.ScalarEvent):
            grow(1)
            if event.anchor:
                anchors[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            open_nodes.append((expanded, event.anchor))
            if len(open_nodes) > MAX_DEPTH:
                raise _refuse(path, f"a spec nested at most {MAX_DEPTH} levels deep")
            grow(1)
        elif isinstance(event, yaml.CollectionEndEvent):
            start, anchor = open_nodes.pop()
            if anchor:
                anchors[anchor] = expanded - start


def check_shape(data, path: Path) -> None:
    """Refuse data nested past MAX_DEPTH (or holding itself) or holding more than MAX_VALUES values."""
    seen = 0
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise _refuse(path, f"a spec of at most {MAX_VALUES:,} values")
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise _refuse(path, f"a spec nested at most {MAX_DEPTH} levels deep (or one that holds itself)")
            children = list(value.values()) + list(value.keys()) if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)


def read_spec_data(path: str | Path):
    """The JSON or YAML value in the spec file (any type: the caller checks it is an object), or ConfigError."""
    path = Path(path)
    got = read_bytes(path, SPEC_LIMIT)
    if got.data is None:
        if got.problem is None:
            raise _refuse(path, ALLOWED + ": there is no such file")
        if got.size > SPEC_LIMIT:
            raise _refuse(path, f"a spec of at most {size_text(SPEC_LIMIT)} (this file is {size_text(got.size)})")
        raise _refuse(path, f"{ALLOWED} ({got.problem})")
    try:
        text = got.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(path, f"UTF-8 text (byte {exc.start} is not)") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:  # pragma: no cover - PyYAML is in requirements.txt
            raise _refuse(path, "a JSON spec (PyYAML is not installed for YAML)") from None
        try:
            _yaml_bounds(text, path)
            data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            problem = str(getattr(exc, "problem", None) or type(exc).__name__)[:200]
            if "nesting depth" in problem:  # libyaml's own bound, met before ours
                raise _refuse(path, f"a spec nested at most {MAX_DEPTH} levels deep") from None
            raise _refuse(path, f"valid YAML ({problem}{where})") from None
        except RecursionError:
            raise _refuse(path, f"a spec nested at most {MAX_DEPTH} levels deep") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _refuse(path, f"valid JSON ({exc.msg} at line {exc.lineno})") from None
        except RecursionError:
            raise _refuse(path, f"a spec nested at most {MAX_DEPTH} levels deep") from None
    check_shape(data, path)
    return data
