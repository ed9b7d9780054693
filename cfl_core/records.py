"""Per-round records and the run folder they are written to as a run goes (read back by cfl_core.run_reader).

A run folder holds `config.json` (written first), `partition.json`, `meta.json`,
`rounds.jsonl` (one JSON line per finished round, flushed at once) and
`summary.json` (at the end). A run that stops or crashes keeps every finished
round, and `cfl_core.run_reader.load_run` loads it back into the same objects.

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
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .folder_lock import HEARTBEAT_FILE  # the writing process and when it started (cfl_core.liveness)
from .jsonio import write_json_atomic

FINISHED, STOPPED, FAILED = "finished", "stopped", "failed"
DIVERGED = "diverged"  # non-finite losses or parameters: stopped, the finished rounds kept
UNFINISHED = "unfinished"  # no summary.json yet: running elsewhere, or the process died
ARI_TARGET = 0.9
CONFIG_FILE = "config.json"  # the file that makes a folder a run folder
ROUNDS_FILE = "rounds.jsonl"
SUMMARY_FILE = "summary.json"
CHECKPOINT_FILE = "checkpoint.pt"  # the latest finished round's state (cfl_core.checkpoint)
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
    extra.update(condition_headlines(last))
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


def condition_headlines(last: RoundRecord | None) -> dict[str, Any]:
    """The headline numbers of the conditions a run ran under (cfl_core/conditions), from its last record: the
    privacy spent, the unseen clients' accuracy and ARI, the attackers' count; nothing for a run without them."""
    if last is None:
        return {}
    out: dict[str, Any] = {}
    ex = last.extras
    if "dp_epsilon" in ex:
        out["dp_epsilon"] = ex["dp_epsilon"]
        out["dp_delta"] = ex.get("dp_delta")
    unseen = ex.get("unseen")
    if isinstance(unseen, dict):
        out["unseen_accuracy"] = unseen.get("accuracy")
        out["unseen_ari"] = unseen.get("ari")
        out["unseen_clients"] = len(unseen.get("clients") or [])
    if ex.get("malicious"):
        out["malicious_clients"] = len(ex["malicious"])
    return out


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
    It holds the folder's lock (cfl_core.folder_lock) from its start to close(): a second writer is refused
    (FolderBusy). A new run into a folder that holds one (checked again under the lock: another process may
    have written it since the caller looked) is refused unless `replace`, which clears the old run's files.
    `lock`: a FolderLock the caller already holds (Experiment.resume takes it before reading the folder).
    """

    def __init__(self, folder: str | os.PathLike, *, resume: bool = False, replace: bool = False, lock=None):
        from .errors import ConfigError
        from .folder_lock import FolderBusy, FolderLock

        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._identity = _identity(os.stat(self.folder))
            self._lock = lock if lock is not None else FolderLock(self.folder)
        except FileExistsError:
            raise RunFolderError(f"cannot create the run folder {self.folder}: a file has that name") from None
        except FolderBusy:
            raise
        except OSError as exc:
            raise RunFolderError(f"cannot create the run folder {self.folder}: {os_error_reason(exc)}") from None
        self._rounds = None
        self._resume = resume
        try:
            if not resume and holds_run(self.folder):
                if not replace:
                    raise ConfigError("out_dir", str(self.folder), "a folder that holds no run yet (another run "
                                                                   "wrote one into it first)")
                clear_run_files(self.folder)
            self.check()
            self.write_json(HEARTBEAT_FILE, _liveness())
        except BaseException:
            self._lock.release()
            raise

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
        return RunFolderError(f"cannot {what}: {os_error_reason(exc)}")

    def write_json(self, name: str, data: Any) -> None:
        self.check()
        # config.json is written exactly: it must rebuild the very run (an lr of 0.1796875 rounded to 6 digits
        # was another config, and the run could not be resumed); its floats are finite (validated)
        exact = name == CONFIG_FILE
        try:
            write_json_atomic(self.folder / name, data if exact else _clean(data))
        except OSError as exc:
            raise self.write_error(f"write {self.folder / name}", exc) from None

    def append(self, record: RoundRecord, sync: bool = True) -> None:
        """The round's line, flushed; with `sync` also on disk (before a checkpoint that counts on it)."""
        self.check()
        try:
            if self._rounds is None:
                self._rounds = open(self.folder / ROUNDS_FILE, "a", encoding="utf-8")
            self._rounds.write(record.to_json() + "\n")
            self._rounds.flush()
            if sync:
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
        self._lock.release()  # after the last write: the next writer sees every round


def _identity(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino


def os_error_reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _liveness() -> dict:
    from .liveness import process_identity

    return process_identity()
