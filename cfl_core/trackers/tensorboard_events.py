"""Export to TensorBoard: event files, one folder per run (`tensorboard --logdir DIR`).

Every per-round metric is a scalar at step = round; the config is a text summary (TensorBoard shows it under
Text) together with the run folder it came from.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import MissingExtra
from .series import run_metrics, runs_under


def _writer_class():
    try:
        import tensorboard  # noqa: F401  (torch's writer needs it; a clear message, not torch's)
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise MissingExtra("--tensorboard", "TensorBoard", "trackers") from None
    return SummaryWriter


def export_tensorboard(source: str | Path, logdir: str | Path) -> list[Path]:
    """Export the run (or every run of the sweep) in `source` into `logdir/<run name>/`; returns those folders.

    A folder exported before is written anew (its old event files are replaced)."""
    writer_class = _writer_class()
    out = []
    for name, run in runs_under(source):
        folder = Path(logdir) / name
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("events.out.tfevents.*"):
            old.unlink()
        writer = writer_class(log_dir=str(folder))
        try:
            for step, metrics in run_metrics(run):
                for metric, value in metrics.items():
                    writer.add_scalar(metric, value, step)
            config = json.dumps(run.config, indent=1, sort_keys=True)
            writer.add_text("config", f"run folder: `{run.folder.resolve()}`\n\n```\n{config}\n```", 0)
        finally:
            writer.close()
        out.append(folder)
    return out
