"""What a tracker receives from a run folder: per-round metrics, the config as flat parameters, and which runs a
folder holds (one run, or every run of a sweep)."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ..errors import ConfigError
from ..records import CONFIG_FILE, RoundRecord
from ..run_reader import SavedRun, load_run, walk_run_folders

# record field -> metric name; a None (no clusters to score, no model yet) is left out, never logged as 0
SCALARS = {
    "accuracy": "accuracy",
    "weighted_accuracy": "weighted_accuracy",
    "ari": "ari",
    "nmi": "nmi",
    "loss": "loss",
    "train_loss": "train_loss",
    "models_in_use": "models_in_use",
    "bytes_up": "traffic/bytes_up",
    "bytes_down": "traffic/bytes_down",
    "seconds": "seconds",
}
SWEEP_DEPTH = 8  # as deep as a sweep's folder template nests its runs


def round_metrics(record: RoundRecord, sent_before: int = 0) -> dict[str, float]:
    """One round's metrics; `sent_before`: the bytes of the rounds before (for the running total)."""
    metrics = {name: float(getattr(record, field)) for field, name in SCALARS.items()
               if getattr(record, field) is not None}
    metrics["traffic/bytes_total"] = float(sent_before + record.bytes_up + record.bytes_down)
    counts = Counter(a for a in record.assignments if a >= 0)
    for model in range(max(counts, default=-1) + 1):
        metrics[f"clients_per_model/{model}"] = float(counts.get(model, 0))
    return metrics


def run_metrics(run: SavedRun) -> list[tuple[int, dict[str, float]]]:
    """(round, metrics) for every finished round of the run."""
    out, sent = [], 0
    for record in run.records:
        out.append((record.round, round_metrics(record, sent)))
        sent += record.bytes_up + record.bytes_down
    return out


def run_params(config: dict) -> dict[str, str]:
    """The config as flat text parameters: `options.<name>` and `shift_options.<name>` for the nested ones."""
    params = {}
    for name, value in sorted(config.items()):
        if isinstance(value, dict):
            for key, inner in sorted(value.items()):
                params[f"{name}.{key}"] = _text(inner)
        else:
            params[name] = _text(value)
    return params


def _text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def runs_under(source: str | Path) -> list[tuple[str, SavedRun]]:
    """(name, run) for a run folder (its own name) or for every run of a sweep folder (its relative path)."""
    folder = Path(source)
    if not folder.is_dir():
        raise ConfigError("RUN_OR_SWEEP", str(source), "a run folder (with config.json) or a sweep folder")
    if (folder / CONFIG_FILE).is_file():
        return [(folder.resolve().name, load_run(folder))]
    # hidden folders are the sweep's own work (runs in flight, being written or on their way out): never exported
    found = sorted((parts, path) for parts, path, _ in walk_run_folders(folder, max_depth=SWEEP_DEPTH,
                                                                         accept=lambda name: not name.startswith(".")))
    if not found:
        raise ConfigError("RUN_OR_SWEEP", str(source), "a run folder (with config.json) or a sweep folder holding "
                                                       "runs: none was found in it")
    return [("/".join(parts), load_run(path)) for parts, path in found]
