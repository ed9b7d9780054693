"""Runs and sweeps exported to the trackers researchers already use: MLflow and TensorBoard.

    from cfl_core import export_mlflow, export_tensorboard
    export_mlflow("runs/sweeps/digits-core", "mlruns")      # an SQLite store, mlruns/mlflow.db + artifacts
    export_tensorboard("runs/my-run", "tb")                 # event files, one folder per run

Each round gives accuracy, ARI, NMI, losses, traffic and how many clients each model holds (series.py);
the config becomes the run's parameters; MLflow also keeps the run folder as an artifact. The libraries
are optional (`pip install 'cfl-lab[trackers]'`); without them the export says so in one line.
"""
from .mlflow_store import export_mlflow
from .series import run_metrics, run_params, runs_under
from .tensorboard_events import export_tensorboard

__all__ = ["export_mlflow", "export_tensorboard", "run_metrics", "run_params", "runs_under"]
