"""Reading run folders back, whatever they hold: a run's config, records, summary and files, validated, and the
one walk over a runs folder (the dashboard's listing builds on it).

`load_run` never raises for a damaged file (invalid JSON, wrong types, bytes that are not UTF-8, a directory or a
symbolic link in place of a file); it keeps what is good and says what is not in `SavedRun.problems` (a bad line in
the middle of rounds.jsonl is skipped and named by its number, the rounds around it are kept). Symbolic links are
never followed: not by the walk, not for a run's files. Loading is plain JSON: nothing is ever unpickled. The
writer is cfl_core.records.
"""
from __future__ import annotations

import dataclasses
import json
import numbers
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from .files import JSON_LIMIT, ROUNDS_LIMIT, read_bytes, size_text
from .files import read_text as _read_text
from .records import (CONFIG_FILE, HEARTBEAT_FILE, ROUNDS_FILE, SUMMARY_FILE, UNFINISHED, RoundRecord, os_error_reason,
                      summarize)


@dataclass
class SavedRun:
    folder: Path
    config: dict[str, Any]
    records: list[RoundRecord]
    summary: dict[str, Any]
    meta: dict[str, Any]
    partition: dict[str, Any] | None
    problems: list[str] = field(default_factory=list)  # what is damaged and was skipped, one line each
    heartbeat: dict[str, Any] | None = None  # the writing process (cfl_core.liveness)

    @property
    def status(self) -> str:
        status = self.summary.get("status", UNFINISHED)
        return status if isinstance(status, str) else UNFINISHED

    @property
    def damaged(self) -> bool:
        return bool(self.problems)

    def experiment_config(self):
        from .config import ExperimentConfig

        return ExperimentConfig.from_dict(self.config)


# -- reading, whatever the folder holds -------------------------------------------------------------
def read_text(path: str | os.PathLike, limit: int = JSON_LIMIT) -> tuple[str | None, str | None]:
    """(text, None), (None, None) when the file is missing, or (None, what is wrong with it).

    Never raises for a damaged file, never blocks (a named pipe is refused, not opened for reading),
    reads at most `limit` bytes; a symbolic link is not followed (cfl_core.files)."""
    return _read_text(path, limit)


def read_json_object(path: str | os.PathLike) -> tuple[dict | None, str | None]:
    """(object, None), (None, None) when missing, or (None, what is wrong): invalid JSON, not an object, ..."""
    text, problem = read_text(path)
    if text is None:
        return None, problem
    name = Path(path).name
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"{name} is not valid JSON ({exc.msg} at line {exc.lineno})"
    except RecursionError:
        return None, f"{name} is nested too deeply"
    if not isinstance(value, dict):
        return None, f"{name} holds {_json_kind(value)}, not a JSON object"
    return value, None


def _json_kind(value) -> str:
    return {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, numbers.Number) else type(value).__name__)


def _conforms(value, hint) -> bool:
    """Whether a JSON value has the type an annotation names (int, float, str, bool, Any, list[...], dict[...],
    X | None)."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        return isinstance(value, list) and all(_conforms(v, item) for v in value)
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    return False


def record_problem(data) -> str | None:
    """None when `data` (one parsed line of rounds.jsonl) is a round record, else what is wrong with it."""
    if not isinstance(data, dict):
        return f"holds {_json_kind(data)}, not a round record"
    hints = _record_hints()
    for f in dataclasses.fields(RoundRecord):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                return f"has no {f.name!r}"
            continue
        if not _conforms(data[f.name], hints[f.name]):
            return f"{f.name!r} is not {_hint_text(hints[f.name])}"
    return None


def _hint_text(hint) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


_HINTS: dict = {}


def _record_hints() -> dict:
    if not _HINTS:
        _HINTS.update(typing.get_type_hints(RoundRecord))
    return _HINTS


@dataclass
class Rounds:
    """What rounds.jsonl holds: the good records, the numbers (from 1) of the bad lines and why."""

    records: list[RoundRecord]
    bad_lines: list[tuple[int, str]]
    torn_tail: bool  # the last line is incomplete (the writing process stopped mid-line)
    problem: str | None  # the file itself could not be read
    good_lines: int  # complete lines that hold a record (before any torn tail)

    def problems(self) -> list[str]:
        out = [self.problem] if self.problem else []
        if self.bad_lines:
            numbers_ = ", ".join(str(n) for n, _ in self.bad_lines[:10]) + (" ..." if len(self.bad_lines) > 10 else "")
            first = self.bad_lines[0]
            out.append(f"{ROUNDS_FILE}: line{'s' if len(self.bad_lines) > 1 else ''} {numbers_} "
                       f"{'are' if len(self.bad_lines) > 1 else 'is'} not a round record and "
                       f"{'were' if len(self.bad_lines) > 1 else 'was'} skipped (line {first[0]} {first[1]}); "
                       f"the other {len(self.records)} rounds are kept")
        return out


def read_rounds(folder: str | os.PathLike) -> Rounds:
    """Every round record in rounds.jsonl, skipping (and numbering) the lines that are not one.

    A last line without its newline that does not parse is a write the process did not finish
    (a crash): it is left out quietly (`torn_tail`), not reported as damage."""
    got = read_bytes(Path(folder) / ROUNDS_FILE, ROUNDS_LIMIT, partial=True)
    problem = got.problem
    text = None
    if got.data is not None:
        data = got.data[:got.data.rfind(b"\n") + 1] if got.truncated else got.data  # whole lines only
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            problem = f"{ROUNDS_FILE} is not UTF-8 text (byte {exc.start})"
    if text is None:
        return Rounds([], [], False, problem and f"{problem}: no rounds could be read", 0)
    lines = text.split("\n")
    tail = lines.pop()  # "" when the file ends with a newline
    records, bad = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        rec, why = _parse_line(line)
        if rec is None:
            bad.append((number, why))
        else:
            records.append(rec)
    torn = False
    if tail.strip():
        rec, _ = _parse_line(tail)
        if rec is None:
            torn = True
        else:
            records.append(rec)
    over = None
    if got.truncated:
        over = (f"{ROUNDS_FILE} is {size_text(got.size)}, over the {size_text(ROUNDS_LIMIT)} read at most: only the "
                f"{len(records)} rounds in its first {size_text(ROUNDS_LIMIT)} are shown, the rest was skipped")
    return Rounds(records, bad, torn, over, len(records))


def _parse_line(line: str) -> tuple[RoundRecord | None, str]:
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:
        return None, f"is not valid JSON ({getattr(exc, 'msg', 'too deep')})"
    why = record_problem(data)
    if why is not None:
        return None, why
    return RoundRecord.from_dict(data), ""


def read_records(folder: str | os.PathLike) -> list[RoundRecord]:
    """Every round record of rounds.jsonl (bad lines skipped, a torn last line ignored)."""
    return read_rounds(folder).records


def clean_config(raw: dict) -> tuple[dict, list[str]]:
    """The config fields of a saved config.json that have their declared type and allowed value, and one
    problem line for each that has not (it is left out). Fields this version does not declare are kept."""
    from .config import ExperimentConfig
    from .errors import ConfigError
    from .settings import settings_of

    declared = settings_of(ExperimentConfig)
    out, problems = {}, []
    for name, value in raw.items():
        s = declared.get(name)
        if s is None:
            out[name] = value
            continue
        try:
            coerced = s.coerce(value)
            s.check(coerced)
        except ConfigError as exc:
            problems.append(f"{CONFIG_FILE}: {exc}; left out")
            continue
        out[name] = coerced
    return out, problems


def load_run(folder: str | os.PathLike) -> SavedRun:
    """A run folder read back. Raises FileNotFoundError only when folder holds no config.json at all;
    anything damaged is skipped and listed in `problems`."""
    folder = Path(folder)
    config_path = folder / CONFIG_FILE
    if not os.path.lexists(config_path):
        raise FileNotFoundError(f"{folder} is not a run folder (no config.json)")
    problems: list[str] = []
    raw, problem = read_json_object(config_path)
    if problem:
        problems.append(problem)
    config, config_problems = clean_config(raw or {})
    problems += config_problems

    def optional(name):
        value, why = read_json_object(folder / name)
        if why:
            problems.append(why)
        return value

    rounds = read_rounds(folder)
    problems += rounds.problems()
    meta = optional("meta.json") or {}
    partition = optional("partition.json")
    summary = optional(SUMMARY_FILE)
    if summary is not None and not isinstance(summary.get("status", UNFINISHED), str):
        problems.append(f"{SUMMARY_FILE}: 'status' is not a text")
        summary = None
    heartbeat, _ = read_json_object(folder / HEARTBEAT_FILE)
    algorithm = config.get("algorithm", "?")
    from .protocols import PROTOCOLS

    protocol = config.get("protocol", "clove")
    summary = summary or summarize(algorithm if isinstance(algorithm, str) else "?", rounds.records, UNFINISHED,
                                   protocol if protocol in PROTOCOLS else "clove")  # a damaged config: the default
    return SavedRun(folder, config, rounds.records, summary, meta, partition, problems, heartbeat)


def walk_run_folders(root: str | os.PathLike, *, markers: tuple[str, ...] = (CONFIG_FILE,), max_depth: int = 1,
                     accept: Callable[[str], bool] | None = None) -> Iterator[tuple[tuple[str, ...], Path, str]]:
    """(parts relative to root, folder, marker) for every folder under root holding one of the marker files.

    The first marker a folder holds is the one reported (the dashboard lists ui.json before
    config.json). Looks at most max_depth levels down, never descends into a folder it reports,
    never follows a symbolic link (a linked folder is neither reported nor entered, a linked marker
    file does not count), skips the names `accept` refuses, and passes over what it cannot read.
    The order is the file system's: callers sort.
    """
    stack = [(Path(root), ())]
    while stack:
        folder, parts = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            if accept is not None and not accept(e.name):
                continue
            try:
                if not e.is_dir(follow_symlinks=False):
                    continue
                rel = (*parts, e.name)
                marker = next((m for m in markers if _plain_file(os.path.join(e.path, m))), None)
                if marker is not None:
                    yield rel, Path(e.path), marker
                elif len(rel) < max_depth:
                    stack.append((Path(e.path), rel))
            except OSError:
                continue


def _plain_file(path: str) -> bool:
    """A file, not a directory and not a symbolic link."""
    return os.path.isfile(path) and not os.path.islink(path)


def list_runs(root: str | os.PathLike) -> list[Path]:
    """Run folders directly under root, newest first."""
    runs = [folder for _, folder, _ in walk_run_folders(root)]
    def mtime(p: Path) -> float:
        try:
            return (p / CONFIG_FILE).stat().st_mtime
        except OSError:
            return 0.0

    return sorted(runs, key=mtime, reverse=True)
