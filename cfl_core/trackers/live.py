"""Trackers fed while a run goes (`cfl-lab run --mlflow DIR --tensorboard DIR`): each finished round is logged at
once, with the same metrics and names as an export (series.py); at the end MLflow gets the run folder as its
artifact and the export key, so a later `cfl-lab export` of the same folder does not add it twice."""
from __future__ import annotations

import json
from pathlib import Path

from ..records import RoundRecord
from ..run_reader import load_run
from .series import round_metrics, run_params


class LiveTrackers:
    def __init__(self, folder: str | Path, config: dict, *, mlflow: str | None = None,
                 tensorboard: str | None = None):
        self.folder = Path(folder)
        self.sent = 0
        self.mlflow = self.writer = None
        if mlflow:
            from mlflow.entities import Param

            from .mlflow_store import PARAM_CHARS, _client, _experiment

            self.mlflow = _client(Path(mlflow))
            experiment_id = _experiment(self.mlflow, self.folder.resolve().name, Path(mlflow))
            run = self.mlflow.create_run(experiment_id, run_name=self.folder.resolve().name,
                                         tags={"cfl_lab_folder": str(self.folder.resolve()),
                                               "algorithm": str(config.get("algorithm", "?"))})
            self.run_id = run.info.run_id
            params = [Param(k, v[:PARAM_CHARS]) for k, v in run_params(config).items()]
            for i in range(0, len(params), 100):
                self.mlflow.log_batch(self.run_id, params=params[i:i + 100])
        if tensorboard:
            from .tensorboard_events import _writer_class

            self.writer = _writer_class()(log_dir=str(Path(tensorboard) / self.folder.resolve().name))

    def log(self, record) -> None:
        record = RoundRecord.from_dict(json.loads(record.to_json()))  # as rounds.jsonl holds it (rounded floats)
        metrics = round_metrics(record, self.sent)
        self.sent += record.bytes_up + record.bytes_down
        if self.mlflow is not None:
            import time

            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            self.mlflow.log_batch(self.run_id, metrics=[Metric(k, v, now, record.round) for k, v in metrics.items()])
        if self.writer is not None:
            for name, value in metrics.items():
                self.writer.add_scalar(name, value, record.round)
            self.writer.flush()

    def close(self, status: str) -> None:
        if self.mlflow is not None:
            from .mlflow_store import export_key

            self.mlflow.set_tag(self.run_id, "cfl_lab_key", export_key(load_run(self.folder)))
            self.mlflow.set_tag(self.run_id, "cfl_lab_status", status)
            self.mlflow.log_artifacts(self.run_id, str(self.folder), "run")
            self.mlflow.set_terminated(self.run_id, "FINISHED" if status == "finished" else "KILLED")
        if self.writer is not None:
            self.writer.close()
