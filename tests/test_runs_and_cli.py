"""Run folders (written as a run goes, reloadable after a stop or a crash), config validation and the CLI."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cfl_core.cli import main
from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment
from cfl_core.run_reader import load_run, list_runs

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(partition="feature-skew", clusters=2, clients_per_cluster=3, samples_per_client=30, models=2)

REQUIRED_ROUND_KEYS = {"round", "phase", "participants", "assignments", "loss_matrix", "client_accuracy",
                       "client_loss", "accuracy", "weighted_accuracy", "ari", "nmi", "models_in_use",
                       "bytes_down", "bytes_up", "seconds"}
REQUIRED_SUMMARY_KEYS = {"algorithm", "final_accuracy", "best_accuracy", "final_ari", "first_round_ari_0_9",
                         "total_bytes", "total_seconds", "rounds_completed", "status"}


def test_run_folder_is_written_as_the_run_goes_and_loads_back(tmp_path):
    exp = Experiment(ExperimentConfig(algorithm="clove", rounds=4, **SMALL), out_dir=tmp_path)
    assert (tmp_path / "config.json").exists() and not (tmp_path / "rounds.jsonl").exists()
    exp.step()
    lines = (tmp_path / "rounds.jsonl").read_text().splitlines()
    assert len(lines) == 1 and REQUIRED_ROUND_KEYS <= set(json.loads(lines[0]))
    exp.run()
    saved = load_run(tmp_path)
    assert saved.status == "finished" and len(saved.records) == 4
    assert REQUIRED_SUMMARY_KEYS <= set(saved.summary)
    assert saved.experiment_config() == exp.config
    assert [r.accuracy for r in saved.records] == [pytest.approx(r.accuracy, abs=1e-6) for r in exp.records]
    assert saved.meta["device"] == "cpu"


def test_a_stopped_run_keeps_its_rounds(tmp_path):
    exp = Experiment(ExperimentConfig(algorithm="fedavg", rounds=10, **{**SMALL, "models": None}), out_dir=tmp_path)
    calls = iter(range(100))
    summary = exp.run(should_stop=lambda: next(calls) >= 3)
    assert summary["status"] == "stopped" and summary["rounds_completed"] == 3
    assert len(load_run(tmp_path).records) == 3


def test_a_crashed_run_keeps_every_finished_round(tmp_path):
    exp = Experiment(ExperimentConfig(algorithm="ifca", rounds=10, **SMALL), out_dir=tmp_path)
    exp.step()
    exp.step()
    original = exp.algorithm.run_round
    exp.algorithm.run_round = lambda *a: (_ for _ in ()).throw(RuntimeError("boom"))
    with pytest.raises(RuntimeError):
        exp.run()
    saved = load_run(tmp_path)
    assert saved.status == "failed" and len(saved.records) == 2
    exp.algorithm.run_round = original


def test_a_run_killed_mid_write_loads_without_its_torn_last_line(tmp_path):
    exp = Experiment(ExperimentConfig(algorithm="clove", rounds=3, **SMALL), out_dir=tmp_path)
    exp.step()
    exp.step()
    with open(tmp_path / "rounds.jsonl", "a") as fh:
        fh.write('{"round": 2, "pha')  # the process died here: no summary.json either
    saved = load_run(tmp_path)
    assert len(saved.records) == 2 and saved.status == "unfinished"
    assert list_runs(tmp_path.parent)[0] == tmp_path


@pytest.mark.parametrize("changes,field", [
    ({"models": 0}, "models"),
    ({"participation": 1.5}, "participation"),
    ({"participation": 0}, "participation"),
    ({"algorithm": "ifca", "models": None}, "models"),
    ({"algorithm": "nope"}, "algorithm"),
    ({"init": "lucky"}, "init"),
    ({"lr": -1.0}, "lr"),
    ({"rounds": 0}, "rounds"),
    ({"options": {"stable_rounds": 0}}, "options.stable_rounds"),
    ({"options": {"colour": "red"}}, "options.colour"),
    ({"partition": "feature-skew", "dataset": "synthetic-blobs"}, "partition"),
    ({"device": "tpu"}, "device"),
])
def test_bad_configs_fail_before_any_work_naming_the_field(changes, field):
    cfg = ExperimentConfig(algorithm="clove", models=4).replace(**changes)
    with pytest.raises(ConfigError) as err:
        cfg.validate()
    assert err.value.parameter == field
    assert field in str(err.value)


def test_unknown_config_file_fields_are_refused():
    with pytest.raises(ConfigError, match="colour"):
        ExperimentConfig.from_dict({"colour": "red"})


def test_cli_run_writes_the_folder_and_prints_a_summary(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--dataset", "digits", "--partition", "feature-skew", "--clusters", "2",
                 "--clients-per-cluster", "3", "--samples-per-client", "30", "--algorithm", "clove",
                 "--models", "2", "--rounds", "3", "--option", "stable_rounds=2", "--out", str(out)])
    assert code == 0
    assert "clove: finished after 3 rounds" in capsys.readouterr().out
    assert load_run(out).config["options"] == {"stable_rounds": 2}  # typed by the option's declaration


def test_cli_config_file_and_flags_override(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({**SMALL, "algorithm": "fedavg", "models": None, "rounds": 5}))
    assert main(["run", "--config", str(cfg), "--rounds", "2", "--out", str(tmp_path / "r")]) == 0
    assert len(load_run(tmp_path / "r").records) == 2


def test_cli_bad_input_exits_non_zero_with_one_line_and_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "cfl_core", "run", "--algorithm", "ifca", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "models" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "cfl_core", "run", "--algorithm", "clove", "--models", "2",
                           "--participation", "2", "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "participation=2.0" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_help_lists_the_subcommands():
    proc = subprocess.run([sys.executable, "-m", "cfl_core", "--help"], cwd=ROOT, capture_output=True, text=True)
    for name in ("datasets", "partition", "run", "compare"):
        assert name in proc.stdout


def test_cli_compare_runs_every_algorithm_on_identical_clients(tmp_path, capsys):
    code = main(["compare", "--algorithms", "clove,ifca,fedavg,oracle", "--partition", "feature-skew",
                 "--clusters", "2", "--clients-per-cluster", "3", "--samples-per-client", "30", "--rounds", "3",
                 "--init", "same", "--out", str(tmp_path)])
    assert code == 0
    table = (tmp_path / "compare.csv").read_text().splitlines()
    assert table[0].startswith("algorithm,final_accuracy") and len(table) == 5
    assert "| clove |" in (tmp_path / "compare.md").read_text()
    runs = {name: load_run(tmp_path / name) for name in ("clove", "ifca", "fedavg", "oracle")}
    # identical clients: the same partition for all
    parts = {json.dumps(r.partition, sort_keys=True) for r in runs.values()}
    assert len(parts) == 1
    assert runs["ifca"].config["models"] == 2  # K-hat defaults to the true cluster count


def test_comparison_gives_each_algorithm_its_own_options():
    from cfl_core.compare import comparison_configs

    base = ExperimentConfig(algorithm="flexcfl", options={"eta_g": 0.1})
    shared = comparison_configs(base, ["flexcfl", "fedgroup", "fedavg"])
    assert [c.options for c in shared] == [{"eta_g": 0.1}, {"eta_g": 0.1}, {}]  # CLI: to every algorithm that has it
    own = comparison_configs(base, ["flexcfl", "fedgroup"], {"flexcfl": {"measure": "madc"}, "fedgroup": {}})
    assert [c.options for c in own] == [{"measure": "madc"}, {}]
    # options another algorithm would reject no longer reach it
    mixed = comparison_configs(base.replace(options={}), ["clove", "fesem"],
                               {"clove": {"first_assignment": "evaluation"}, "fesem": {}})
    assert mixed[0].options == {"first_assignment": "evaluation"} and mixed[1].options == {}


def test_cuda_without_a_gpu_is_refused_before_any_work(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: nothing to refuse")  # the CPU-only path is what this checks
    with pytest.raises(ConfigError, match="device='cuda' is not allowed"):
        ExperimentConfig(device="cuda").validate()
    out = tmp_path / "never"
    code = subprocess.run([sys.executable, "-m", "cfl_core", "run", "--device", "cuda", "--out", str(out)],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert code.returncode == 2 and "device='cuda' is not allowed" in code.stderr and not out.exists()


def test_progress_to_a_log_is_about_twenty_lines_with_every_change_of_phase_and_the_last_round():
    """Not a terminal (a log, a pipe): a 2000-round run printed 2000 progress lines."""
    import io
    from types import SimpleNamespace

    from cfl_core.cli.run_cmd import ProgressBar

    def rec(r, phase):
        return SimpleNamespace(round=r, accuracy=0.5, loss=1.0, ari=1.0, extras={}, phase=phase)

    log = io.StringIO()
    bar = ProgressBar(2000, "clove", stream=log)
    for r in range(2000):
        bar.update(rec(r, "init" if r == 0 else "clustering" if r < 7 else "stable"))
    lines = log.getvalue().splitlines()
    shown = [int(line.split("] ")[1].split("/")[0]) for line in lines]
    assert shown[0] == 1 and shown[-1] == 2000 and {2, 8} <= set(shown)  # first, phase changes, last
    assert len(lines) <= ProgressBar.PLAIN_LINES + 3 and shown == sorted(set(shown))
    short = io.StringIO()
    bar = ProgressBar(12, "ifca", stream=short)
    for r in range(12):
        bar.update(rec(r, "training"))
    assert len(short.getvalue().splitlines()) == 12  # a short run: every round
