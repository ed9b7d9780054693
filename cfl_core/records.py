"""Per-round records and the run folder they are written to as a run goes.

A run folder holds `config.json` (written first), `partition.json`, `meta.json`,
`rounds.jsonl` (one JSON line per finished round, flushed at once) and
`summary.json` (at the end). A run that stops or crashes keeps every finished
round and loads back into the same objects. Loading is plain JSON: nothing is
ever unpickled. `walk_run_folders` is the one walk over a runs folder (the
dashboard's listing builds on it).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from .jsonio import write_json_atomic

FINISHED, STOPPED, FAILED = "finished", "stopped", "failed"
UNFINISHED = "unfinished"  # no summary.json yet: running elsewhere, or the process died
ARI_TARGET = 0.9
CONFIG_FILE = "config.json"  # the file that makes a folder a run folder


def _clean(value):
    """JSON-safe copy: NaN/inf become null, floats keep 6 significant digits."""
    if isinstance(value, float):
        return None if not math.isfinite(value) else float(f"{value:.6g}")
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
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
        return json.dumps(_clean(dataclasses.asdict(self)), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict) -> "RoundRecord":
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        extras = dict(known.pop("extras", {}) or {})
        extras.update({k: v for k, v in data.items() if k not in names})  # fields added by newer versions
        return cls(**known, extras=extras)


def summarize(algorithm: str, records: list[RoundRecord], status: str, protocol: str = "clove") -> dict[str, Any]:
    """The run's headline numbers; `reported_accuracy` is the accuracy under `protocol` (cfl_core.protocols)."""
    from .protocols import reported_accuracy

    accs = [r.accuracy for r in records if r.accuracy is not None]
    reported, reported_round = reported_accuracy(protocol, records)
    first = next((r.round for r in records if r.ari is not None and r.ari >= ARI_TARGET), None)
    last = records[-1] if records else None
    # ARI that does not apply (no clusters, or no true ones) is said so, never left to look like a missing score
    not_applicable = {"ari_applicable": False} if last is not None and last.extras.get("ari_applicable") is False else {}
    return _clean({
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
        **not_applicable,
    })


class RunWriter:
    """Appends to a run folder; every write is complete on disk before it returns."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._rounds = None

    def write_json(self, name: str, data: Any) -> None:
        write_json_atomic(self.folder / name, _clean(data))

    def append(self, record: RoundRecord) -> None:
        if self._rounds is None:
            self._rounds = open(self.folder / "rounds.jsonl", "a", encoding="utf-8")
        self._rounds.write(record.to_json() + "\n")
        self._rounds.flush()
        os.fsync(self._rounds.fileno())

    def close(self) -> None:
        if self._rounds is not None:
            self._rounds.close()
            self._rounds = None


@dataclass
class SavedRun:
    folder: Path
    config: dict[str, Any]
    records: list[RoundRecord]
    summary: dict[str, Any]
    meta: dict[str, Any]
    partition: dict[str, Any] | None

    @property
    def status(self) -> str:
        return self.summary.get("status", UNFINISHED)

    def experiment_config(self):
        from .config import ExperimentConfig

        return ExperimentConfig.from_dict(self.config)


def read_records(folder: str | os.PathLike) -> list[RoundRecord]:
    """Every complete line of rounds.jsonl; a torn last line (a crash mid-write) is ignored."""
    path = Path(folder) / "rounds.jsonl"
    records = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(RoundRecord.from_dict(json.loads(line)))
            except (json.JSONDecodeError, TypeError):
                break
    return records


def load_run(folder: str | os.PathLike) -> SavedRun:
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.exists():
        raise FileNotFoundError(f"{folder} is not a run folder (no config.json)")
    config = json.loads(config_path.read_text(encoding="utf-8"))

    def optional(name):
        p = folder / name
        return json.loads(p.read_text(encoding="utf-8")) if p.exists() else None

    records = read_records(folder)
    meta = optional("meta.json") or {}
    summary = optional("summary.json") or summarize(config.get("algorithm", "?"), records, UNFINISHED,
                                                    config.get("protocol", "clove"))
    return SavedRun(folder, config, records, summary, meta, optional("partition.json"))


def walk_run_folders(root: str | os.PathLike, *, markers: tuple[str, ...] = (CONFIG_FILE,), max_depth: int = 1,
                     accept: Callable[[str], bool] | None = None) -> Iterator[tuple[tuple[str, ...], Path, str]]:
    """(parts relative to root, folder, marker) for every folder under root holding one of the marker files.

    The first marker a folder holds is the one reported (the dashboard lists ui.json before
    config.json). Looks at most max_depth levels down, never descends into a folder it reports
    nor through a symlink, skips the names `accept` refuses, and passes over what it cannot read.
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
                if not e.is_dir():
                    continue
                rel = (*parts, e.name)
                marker = next((m for m in markers if os.path.isfile(os.path.join(e.path, m))), None)
                if marker is not None:
                    yield rel, Path(e.path), marker
                elif len(rel) < max_depth and not e.is_symlink():
                    stack.append((Path(e.path), rel))
            except OSError:
                continue


def list_runs(root: str | os.PathLike) -> list[Path]:
    """Run folders directly under root, newest first."""
    runs = [folder for _, folder, _ in walk_run_folders(root)]
    return sorted(runs, key=lambda p: (p / CONFIG_FILE).stat().st_mtime, reverse=True)
