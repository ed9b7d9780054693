"""Export to MLflow: one MLflow run per CFL Lab run, in an SQLite store inside a folder (no server needed).

    DIR/mlflow.db      the tracking store: `mlflow ui --backend-store-uri sqlite:///DIR/mlflow.db`
    DIR/artifacts/     each run's folder, copied as the artifact `run/`

MLflow's file store (./mlruns) is in maintenance mode since MLflow 3; SQLite is what MLflow recommends for a
local store. An export names its MLflow run after the run's folder, tags it with where it came from, and
skips a run already exported with the same rounds (exporting a sweep again adds only what is new).
"""
from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

from ..errors import MissingExtra
from .series import run_metrics, run_params, runs_under

BATCH_METRICS = 1000  # MLflow's limits for one log_batch call
BATCH_PARAMS = 100
PARAM_CHARS = 6000


def store_uri(folder: str | Path) -> str:
    return f"sqlite:///{Path(folder).resolve() / 'mlflow.db'}"


def _client(folder: Path):
    try:
        import sqlalchemy  # noqa: F401  (the SQLite store's engine: a clear message, not MLflow's)
        from mlflow.entities import Metric  # noqa: F401
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise MissingExtra("--mlflow", "MLflow (with SQLAlchemy)", "trackers") from None
    logging.getLogger("mlflow").setLevel(logging.WARNING)  # not its "creating tables" lines on every export
    logging.getLogger("alembic").setLevel(logging.WARNING)
    folder.mkdir(parents=True, exist_ok=True)
    return MlflowClient(tracking_uri=store_uri(folder))


def _experiment(client, name: str, folder: Path) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    return client.create_experiment(name, artifact_location=(folder.resolve() / "artifacts").as_uri())


def export_key(run) -> str:
    """The same run folder with the same finished rounds gives the same key (a re-export skips it)."""
    text = f"{run.folder.resolve()}|{len(run.records)}|{run.status}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def export_mlflow(source: str | Path, store: str | Path, experiment: str | None = None) -> list[str]:
    """Export the run (or every run of the sweep) in `source` into the MLflow store in folder `store`.

    experiment: the MLflow experiment's name (default: the source folder's name). Returns the MLflow run ids
    written, in the order of the runs (a run exported before keeps its id and is not written again)."""
    runs = runs_under(source)
    folder = Path(store)
    client = _client(folder)
    from mlflow.entities import Metric, Param, RunTag
    experiment_id = _experiment(client, experiment or Path(source).resolve().name, folder)
    ids = []
    for name, run in runs:
        key = export_key(run)
        before = client.search_runs([experiment_id], filter_string=f"tags.cfl_lab_key = '{key}'", max_results=1)
        if before:
            ids.append(before[0].info.run_id)
            continue
        tags = {"cfl_lab_key": key, "cfl_lab_folder": str(run.folder.resolve()), "cfl_lab_status": run.status,
                "algorithm": str(run.config.get("algorithm", "?"))}
        created = client.create_run(experiment_id, run_name=name, tags=tags)
        run_id = created.info.run_id
        now = int(time.time() * 1000)
        params = [Param(k, v[:PARAM_CHARS]) for k, v in run_params(run.config).items()]
        metrics = [Metric(metric, value, now, step) for step, values in run_metrics(run)
                   for metric, value in values.items()]
        for i in range(0, len(params), BATCH_PARAMS):
            client.log_batch(run_id, params=params[i:i + BATCH_PARAMS])
        for i in range(0, len(metrics), BATCH_METRICS):
            client.log_batch(run_id, metrics=metrics[i:i + BATCH_METRICS])
        client.log_batch(run_id, tags=[RunTag(k, v) for k, v in _summary_tags(run.summary).items()])
        client.log_artifacts(run_id, str(run.folder), "run")
        client.set_terminated(run_id, "FINISHED" if run.status == "finished" else "KILLED")
        ids.append(run_id)
    return ids


def _summary_tags(summary: dict) -> dict[str, str]:
    """The summary's headline numbers, as tags (MLflow's runs table shows them as columns)."""
    keep = ("final_accuracy", "final_ari", "reported_accuracy", "rounds_completed", "total_bytes", "total_seconds")
    return {f"summary.{k}": str(summary[k]) for k in keep if summary.get(k) is not None}
