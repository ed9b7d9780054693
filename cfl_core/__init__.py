"""CFL Lab simulation core: data, partitions, batched engine, algorithms, records.

A plain library: it never imports Streamlit. The dashboard, the CLI, the
benchmark and the tests all drive the same public API, which is exactly the
names in `__all__` below (docs/python-api.md); everything else may change.

    from cfl_core import Experiment, ExperimentConfig, load_run
    summary = Experiment(ExperimentConfig(algorithm="ifca", models=4, rounds=10), out_dir="runs/ifca").run()
    run = load_run("runs/ifca")            # config, records (one RoundRecord per round), summary

The names load on first use, so `import cfl_core` stays cheap.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> the module that defines it
_PUBLIC = {
    # one experiment
    "ExperimentConfig": "config",
    "Experiment": "experiment",
    "run_comparison": "compare",
    # reading run folders back
    "RoundRecord": "records",
    "SavedRun": "run_reader",
    "load_run": "run_reader",
    "read_records": "run_reader",
    "list_runs": "run_reader",
    # sweeps
    "SweepSpec": "sweep",
    "run_sweep": "sweep",
    # data and partitions
    "PartitionConfig": "partition",
    "build_partition": "partition",
    "ClusterStructure": "partition",
    "load_dataset": "data",
    "dataset_info": "data",
    "source_status": "data",
    # what a plugin defines (docs/contributing.md)
    "Algorithm": "algorithms",
    "RoundOutcome": "algorithms",
    "AlgorithmOptions": "algorithms.base",
    "InitOptions": "algorithms.base",
    "WeightingOptions": "algorithms.base",
    "DataSource": "data",
    "Dataset": "data",
    "DatasetInfo": "data",
    "setting": "settings",
    "Choice": "settings",
    "Interval": "settings",
    # the registries (built-ins and installed plugins) and the plugins left out
    "ALGORITHMS": "algorithms",
    "DATA_SOURCES": "data",
    "PARTITIONS": "partition",
    "plugin_problems": "plugins",
    # trackers
    "export_mlflow": "trackers",
    "export_tensorboard": "trackers",
    # errors with a message meant for people
    "ConfigError": "errors",
    "DataUnavailable": "errors",
}

__all__ = sorted(_PUBLIC) + ["__version__"]


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'cfl_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))
