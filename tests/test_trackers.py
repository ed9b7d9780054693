"""`cfl-lab export`: a run and a sweep read back with MLflow's and TensorBoard's own readers, every number equal to
rounds.jsonl; without the libraries the command names the extra to install."""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from cfl_core import Experiment, ExperimentConfig
from cfl_core.cli import main

SMALL = dict(clusters=2, clients_per_cluster=3, samples_per_client=30, local_epochs=1, rounds=3)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """A sweep-like folder of two runs: IFCA (models, ARI) and CLoVE (its own options)."""
    root = tmp_path_factory.mktemp("sweep") / "tiny-sweep"
    Experiment(ExperimentConfig(algorithm="ifca", models=2, **SMALL), out_dir=root / "seed0" / "ifca").run()
    Experiment(ExperimentConfig(algorithm="clove", models=2, options={"stable_rounds": 2}, **SMALL),
               out_dir=root / "seed0" / "clove").run()
    return root


def rounds_of(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]


def expected(folder: Path) -> dict[str, list[float]]:
    """Per metric, the value of every round, read straight from rounds.jsonl."""
    out: dict[str, list[float]] = {}
    sent = 0
    for line in rounds_of(folder):
        sent += line["bytes_up"] + line["bytes_down"]
        values = {"accuracy": line["accuracy"], "ari": line["ari"], "nmi": line["nmi"], "loss": line["loss"],
                  "traffic/bytes_up": line["bytes_up"], "traffic/bytes_down": line["bytes_down"],
                  "traffic/bytes_total": sent}
        counts = Counter(a for a in line["assignments"] if a >= 0)
        values.update({f"clients_per_model/{k}": counts[k] for k in range(max(counts) + 1)})
        for name, value in values.items():
            out.setdefault(name, []).append(float(value))
    return out


def test_mlflow_reads_back_every_round_the_config_and_the_run_folder(sweep, tmp_path):
    from mlflow.tracking import MlflowClient

    assert main(["export", "--mlflow", str(tmp_path / "store"), str(sweep)]) == 0
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("tiny-sweep")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {"seed0/ifca", "seed0/clove"}
    for name, run in runs.items():
        folder = sweep / name
        for metric, values in expected(folder).items():
            history = sorted(client.get_metric_history(run.info.run_id, metric), key=lambda m: m.step)
            assert [m.step for m in history] == [0, 1, 2], metric
            assert [m.value for m in history] == values, (name, metric)
        config = json.loads((folder / "config.json").read_text())
        assert run.data.params["algorithm"] == config["algorithm"] and run.data.params["rounds"] == "3"
        artifacts = {Path(a.path).name for a in client.list_artifacts(run.info.run_id, "run")}
        assert {"config.json", "rounds.jsonl", "summary.json"} <= artifacts
    assert runs["seed0/clove"].data.params["options.stable_rounds"] == "2"
    assert runs["seed0/ifca"].data.params["models"] == "2"
    # exporting again adds nothing: the same runs, the same ids
    again = main(["export", "--mlflow", str(tmp_path / "store"), str(sweep / "seed0" / "ifca"),
                  "--experiment", "tiny-sweep"])
    assert again == 0 and len(client.search_runs([experiment.experiment_id])) == 2


def test_tensorboard_reads_back_every_round_and_the_config(sweep, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = sweep / "seed0" / "ifca"
    assert main(["export", "--tensorboard", str(tmp_path / "tb"), str(run)]) == 0
    events = EventAccumulator(str(tmp_path / "tb" / "ifca"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    for metric, values in expected(run).items():
        scalars = events.Scalars(metric)
        assert [s.step for s in scalars] == [0, 1, 2], metric
        assert [s.value for s in scalars] == pytest.approx(values, rel=1e-6), metric  # stored as float32
    text = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert '"algorithm": "ifca"' in text and str(run.resolve()) in text


@pytest.mark.parametrize("flag, modules", [("--mlflow", ("mlflow", "mlflow.tracking", "mlflow.entities")),
                                           ("--tensorboard", ("tensorboard", "torch.utils.tensorboard"))])
def test_without_the_tracker_library_the_command_names_the_extra(sweep, tmp_path, monkeypatch, capsys, flag,
                                                                 modules):
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed: importing it fails
    assert main(["export", flag, str(tmp_path / "out"), str(sweep)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'cfl-lab[trackers]'" in err[0] and err[0].startswith(f"error: {flag} needs")


def test_a_folder_without_runs_is_one_line(tmp_path, capsys):
    assert main(["export", "--tensorboard", str(tmp_path / "tb"), str(tmp_path)]) == 2
    assert "none was found in it" in capsys.readouterr().err
    assert main(["export", str(tmp_path)]) == 2
    assert "--mlflow DIR and/or --tensorboard DIR" in capsys.readouterr().err


def test_a_run_logs_to_both_trackers_live_and_a_later_export_adds_nothing(tmp_path):
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "live-run"
    assert main(["run", "--algorithm", "ifca", "--models", "2", "--clusters", "2", "--clients-per-cluster", "3",
                 "--samples-per-client", "30", "--local-epochs", "1", "--rounds", "3", "--out", str(run),
                 "--mlflow", str(tmp_path / "store"), "--tensorboard", str(tmp_path / "tb")]) == 0
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("live-run")
    [logged] = client.search_runs([experiment.experiment_id])
    events = EventAccumulator(str(tmp_path / "tb" / "live-run"), size_guidance={"scalars": 0})
    events.Reload()
    for metric, values in expected(run).items():
        history = sorted(client.get_metric_history(logged.info.run_id, metric), key=lambda m: m.step)
        assert [m.value for m in history] == values, metric
        assert [s.value for s in events.Scalars(metric)] == pytest.approx(values, rel=1e-6), metric
    assert logged.info.status == "FINISHED" and logged.data.params["models"] == "2"
    assert "rounds.jsonl" in {Path(a.path).name for a in client.list_artifacts(logged.info.run_id, "run")}
    assert main(["export", "--mlflow", str(tmp_path / "store"), str(run)]) == 0
    assert len(client.search_runs([experiment.experiment_id])) == 1
