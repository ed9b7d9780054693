"""Per-round records and the run folder they are written to as a run goes.

A run folder holds `config.json` (written first), `partition.json`, `meta.json`,
`rounds.jsonl` (one JSON line per finished round, flushed at once) and
`summary.json` (at the end). A run that stops or crashes keeps every finished
round and loads back into the same objects. Loading is plain JSON: nothing is
ever unpickled. `walk_run_folders` is the one walk over a runs folder (the
dashboard's listing builds on it).

Reading survives damage: `load_run` never raises for a damaged file (invalid
JSON, wrong types, bytes that are not UTF-8, a directory or a symbolic link in
place of a file); it keeps what is good and says what is not in
`SavedRun.problems` (a bad line in the middle of rounds.jsonl is skipped and
named by its number, the rounds around it are kept). Symbolic links are never
followed: not by the walk, not for a run's files.

Writing refuses to mix runs: a folder that already holds a run is replaced only
when asked (`overwrite`), and `RunWriter` checks before every write that its
folder is still the one it created and still writable, so a folder deleted or
made read-only under a running experiment stops it at the next round
(`RunFolderError`) instead of writing into nowhere.
"""
from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from .jsonio import write_json_atomic

FINISHED, STOPPED, FAILED = "finished", "stopped", "failed"
DIVERGED = "diverged"  # non-finite losses or parameters: stopped, the finished rounds kept
UNFINISHED = "unfinished"  # no summary.json yet: running elsewhere, or the process died
ARI_TARGET = 0.9
CONFIG_FILE = "config.json"  # the file that makes a folder a run folder
ROUNDS_FILE = "rounds.jsonl"
SUMMARY_FILE = "summary.json"
CHECKPOINT_FILE = "checkpoint.pt"  # the latest finished round's state (cfl_core.checkpoint)
HEARTBEAT_FILE = "heartbeat.json"  # the writing process and when it last wrote (see RunWriter.beat)
# what a run writes into its folder: replaced together by `overwrite`
RUN_FILES = (CONFIG_FILE, "partition.json", "meta.json", ROUNDS_FILE, SUMMARY_FILE, CHECKPOINT_FILE,
             HEARTBEAT_FILE)


class RunFolderError(OSError):
    """A run folder that cannot be (or can no longer be) written: the message says which and why."""


def _clean(value):
    """JSON-safe copy: NaN/inf become null, floats keep 6 significant digits."""
    if isinstance(value, float):
        return None if not math.isfinite(value) else float(f"{value:.6g}")
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _clean({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    return value


@dataclass
class RoundRecord:
    round: int
    phase: str
    participants: list[int]
    assignments: list[int]  # model index per client; -1 = no model yet (not joined, or never taken part)
    loss_matrix: list[list[float]] | None  # rows follow `participants`; None when not computed
    client_accuracy: list[float | None]  # per client on its model; None where it has none
    client_loss: list[float | None]
    accuracy: float | None  # unweighted mean over clients (as CLoVE reports)
    weighted_accuracy: float | None  # weighted by test size (as FlexCFL reports)
    ari: float | None
    nmi: float | None
    models_in_use: int
    bytes_down: int
    bytes_up: int
    seconds: float
    true_clusters: list[int] = field(default_factory=list)  # can change under distribution shift
    loss: float | None = None  # mean test loss over clients
    train_loss: float | None = None  # mean local training loss of participants
    # clients with a model this round: accuracy, loss, ARI and NMI are over these (under partial
    # participation, CLoVE and IFCA have no model yet for a client that has never taken part)
    evaluated: int | None = None
    extras: dict[str, Any] = field(default_factory=dict)  # algorithm-specific (norms, EDC features, ...)

    def to_json(self) -> str:
        # _clean copies as it goes: dataclasses.asdict's deep copy before it was two thirds of the time (an ended
        # 2000-round run's export took 1.4 s)
        return json.dumps(_clean({f.name: getattr(self, f.name) for f in dataclasses.fields(self)}),
                          separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict) -> "RoundRecord":
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        extras = dict(known.pop("extras", {}) or {})
        extras.update({k: v for k, v in data.items() if k not in names})  # fields added by newer versions
        return cls(**known, extras=extras)


def summarize(algorithm: str, records: list[RoundRecord], status: str, protocol: str = "clove",
              error: str | None = None) -> dict[str, Any]:
    """The run's headline numbers; `reported_accuracy` is the accuracy under `protocol` (cfl_core.protocols).
    Computed from the values as the run folder holds them (6 significant digits), so a run resumed from its
    folder summarises exactly as one that never stopped."""
    from .protocols import reported_accuracy, reported_extras

    accs = [_clean(r.accuracy) for r in records if r.accuracy is not None]
    reported, reported_round = reported_accuracy(protocol, records)
    first = next((r.round for r in records if r.ari is not None and _clean(r.ari) >= ARI_TARGET), None)
    last = records[-1] if records else None
    # ARI that does not apply (no clusters, or no true ones) is said so, never left to look like a missing score
    not_applicable = {"ari_applicable": False} if last is not None and last.extras.get("ari_applicable") is False else {}
    extra = {"error": error} if error else {}
    return _clean({**extra,
        "algorithm": algorithm,
        "status": status,
        "rounds_completed": len(records),
        "final_accuracy": last.accuracy if last else None,
        "best_accuracy": max(accs) if accs else None,
        "final_loss": last.loss if last else None,
        "final_ari": last.ari if last else None,
        "final_nmi": last.nmi if last else None,
        "first_round_ari_0_9": first,
        "total_bytes": sum(r.bytes_down + r.bytes_up for r in records),
        "total_seconds": sum(r.seconds for r in records),
        "protocol": protocol,
        "reported_accuracy": reported,
        "reported_round": reported_round,
        **reported_extras(protocol, records),
        **not_applicable,
    })


def clear_run_files(folder: str | os.PathLike) -> None:
    """Remove the files a run writes (RUN_FILES) from folder, so a new run does not mix with the old one."""
    for name in RUN_FILES:
        path = Path(folder) / name
        try:
            if path.is_symlink() or path.is_file():
                path.unlink()
        except FileNotFoundError:
            pass


def holds_run(folder: str | os.PathLike) -> bool:
    """Whether folder already holds a run's files (any of RUN_FILES)."""
    return any(os.path.lexists(Path(folder) / name) for name in RUN_FILES)


class RunWriter:
    """Appends to a run folder; every write is complete on disk before it returns.

    Before each write it checks that the folder is still the directory it created (not deleted,
    not replaced) and still writable, and that rounds.jsonl is still the file it appends to;
    otherwise RunFolderError says what happened, so the run stops instead of writing into nowhere.
    `resume`: the folder holds an earlier part of this run (rounds are appended to it).
    """

    def __init__(self, folder: str | os.PathLike, *, resume: bool = False):
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._identity = _identity(os.stat(self.folder))
        except OSError as exc:
            raise RunFolderError(f"cannot create the run folder {self.folder}: {_reason(exc)}") from None
        self._rounds = None
        self._resume = resume
        self.check()
        self.write_json(HEARTBEAT_FILE, _liveness())

    def check(self) -> None:
        """RunFolderError unless the folder is still there, the same directory, and writable."""
        try:
            now = os.stat(self.folder)
        except OSError:
            raise RunFolderError(f"the run folder {self.folder} was deleted while the run was going") from None
        if _identity(now) != self._identity:
            raise RunFolderError(f"the run folder {self.folder} was replaced by another while the run was going")
        if not os.access(self.folder, os.W_OK | os.X_OK):
            raise RunFolderError(f"the run folder {self.folder} is no longer writable")
        if self._rounds is not None:
            try:
                same = _identity(os.stat(self.folder / ROUNDS_FILE)) == _identity(os.fstat(self._rounds.fileno()))
            except OSError:
                same = False
            if not same:
                raise RunFolderError(f"{self.folder / ROUNDS_FILE} was deleted or replaced while the run was going")

    def write_error(self, what: str, exc: OSError) -> RunFolderError:
        """Why writing `what` failed: the folder's own state first (deleted, replaced or made read-only between the
        check and the write), the system's reason otherwise."""
        try:
            self.check()
        except RunFolderError as gone:
            return gone
        return RunFolderError(f"cannot {what}: {_reason(exc)}")

    def write_json(self, name: str, data: Any) -> None:
        self.check()
        # config.json is written exactly: it must rebuild the very run (an lr of 0.1796875 rounded to 6 digits
        # was another config, and the run could not be resumed); its floats are finite (validated)
        exact = name == CONFIG_FILE
        try:
            write_json_atomic(self.folder / name, data if exact else _clean(data))
        except OSError as exc:
            raise self.write_error(f"write {self.folder / name}", exc) from None

    def append(self, record: RoundRecord) -> None:
        self.check()
        try:
            if self._rounds is None:
                self._rounds = open(self.folder / ROUNDS_FILE, "a", encoding="utf-8")
            self._rounds.write(record.to_json() + "\n")
            self._rounds.flush()
            os.fsync(self._rounds.fileno())
        except OSError as exc:
            raise self.write_error(f"append to {self.folder / ROUNDS_FILE}", exc) from None

    def close(self) -> None:
        if self._rounds is not None:
            try:
                self._rounds.close()
            except OSError:
                pass
            self._rounds = None


def _identity(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _liveness() -> dict:
    from .liveness import process_identity

    return process_identity()


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
def read_text(path: str | os.PathLike) -> tuple[str | None, str | None]:
    """(text, None), (None, None) when the file is missing, or (None, what is wrong with it).

    Never raises for a damaged file; a symbolic link is not followed."""
    path = Path(path)
    name = path.name
    if path.is_symlink():
        return None, f"{name} is a symbolic link (not followed)"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except IsADirectoryError:
        return None, f"{name} is a directory, not a file"
    except OSError as exc:
        return None, f"{name} cannot be read ({_reason(exc)})"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, f"{name} is not UTF-8 text (byte {exc.start})"


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
    text, problem = read_text(Path(folder) / ROUNDS_FILE)
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
    return Rounds(records, bad, torn, None, len(records))


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
