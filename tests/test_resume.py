"""Runs that resume: killed with SIGKILL mid-run, a run continues from its last finished round with records identical
to a run that never stopped; the checkpoint is tensors and JSON only (loaded with weights_only=True)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from cfl_core.cli import main
from cfl_core.config import ExperimentConfig
from cfl_core.errors import ResumeError
from cfl_core.experiment import Experiment
from cfl_core.run_reader import load_run

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(dataset="digits", partition="feature-skew", clusters=3, clients_per_cluster=4, samples_per_client=30,
             local_epochs=1, device="cpu")


def records(folder) -> list[dict]:
    """Every record as written, but its wall time."""
    out = [json.loads(line) for line in (Path(folder) / "rounds.jsonl").read_text().splitlines()]
    for r in out:
        r.pop("seconds")
    return out


def summary(folder) -> dict:
    data = json.loads((Path(folder) / "summary.json").read_text())
    data.pop("total_seconds")
    return data


def straight(config: ExperimentConfig, folder: Path) -> Path:
    Experiment(config, out_dir=folder).run()
    return folder


def test_a_run_killed_with_sigkill_resumes_identically(tmp_path):
    flags = ["--dataset", "digits", "--partition", "concept-shift", "--clusters", "3", "--clients-per-cluster", "4",
             "--samples-per-client", "30", "--algorithm", "clove", "--models", "3", "--rounds", "400",
             "--participation", "0.75", "--device", "cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "cfl_core", "run", *flags, "--out", str(killed)], cwd=ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            rounds = killed / "rounds.jsonl"
            if rounds.exists() and rounds.read_text().count("\n") >= 5:
                break
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)  # no handler runs: whatever is on disk is all there is
    finally:
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    done = records(killed)
    assert 5 <= len(done) < 400, "the run must be killed mid-way"
    assert not (killed / "summary.json").exists()
    assert load_run(killed).status == "unfinished"
    resumed = subprocess.run([sys.executable, "-m", "cfl_core", "run", "--resume", str(killed)], cwd=ROOT, env=env,
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr and "clove: finished after 400 rounds" in resumed.stdout
    reference = tmp_path / "reference"
    assert main(["run", *flags, "--out", str(reference)]) == 0
    assert records(killed) == records(reference)
    assert summary(killed) == summary(reference)
    assert sorted(os.listdir(killed)) == sorted(os.listdir(reference))  # one checkpoint, no temporary files


@pytest.mark.parametrize("changes", [
    dict(algorithm="fedavg", shift="swap-all", shift_options={"probability": 1.0}),
    dict(algorithm="flexcfl", models=3, shift="swap-part", shift_options={"probability": 1.0}, newcomer_share=0.25,
         newcomer_round=2),
    dict(algorithm="local", shift="incremental"),
    dict(algorithm="cfl", partition="concept-shift", participation=0.75,
         options={"warmup_rounds": 1, "eps1": 5.0, "eps2": 0.1, "gamma_max": 0.05}),
    dict(algorithm="ifca", models=3, init="restarts", newcomer_share=0.25, newcomer_round=3),
])
def test_resume_after_each_round_replays_shifts_and_keeps_every_kind_of_state(tmp_path, changes):
    config = ExperimentConfig(**{**SMALL, "rounds": 6, **changes})
    reference = straight(config, tmp_path / "reference")
    for stop_after in (1, 4):
        folder = tmp_path / f"stopped{stop_after}"
        exp = Experiment(config, out_dir=folder)
        for _ in range(stop_after):
            exp.step()
        del exp  # as after a kill: no summary
        Experiment.resume(folder).run()
        assert records(folder) == records(reference), f"resumed after {stop_after} rounds"
        assert summary(folder) == summary(reference)
    if changes["algorithm"] == "cfl":
        assert any(r["extras"].get("split_events") for r in records(reference))  # the tree was checkpointed


def test_a_kill_between_the_round_and_its_checkpoint_runs_that_round_again(tmp_path):
    config = ExperimentConfig(**SMALL, algorithm="clove", models=3, rounds=5)
    reference = straight(config, tmp_path / "reference")
    folder = tmp_path / "x"
    exp = Experiment(config, out_dir=folder)
    exp.step()
    exp.step()
    older = (folder / "checkpoint.pt").read_bytes()
    exp.step()
    (folder / "checkpoint.pt").write_bytes(older)  # round 2 is on disk, its checkpoint is not
    with open(folder / "rounds.jsonl", "a") as fh:
        fh.write('{"round": 3, "ph')  # and a torn line after it
    exp = Experiment.resume(folder)
    assert exp.round == 2 and len(records(folder)) == 2
    exp.run()
    assert records(folder) == records(reference)


def test_a_run_stopped_before_its_first_round_starts_again(tmp_path):
    config = ExperimentConfig(**SMALL, algorithm="fedavg", rounds=3)
    folder = tmp_path / "x"
    Experiment(config, out_dir=folder)  # set up, never stepped
    exp = Experiment.resume(folder)
    assert exp.round == 0
    exp.run()
    assert records(folder) == records(straight(config, tmp_path / "reference"))


def test_what_cannot_be_resumed_says_why_in_one_line(tmp_path, capsys):
    config = ExperimentConfig(**SMALL, algorithm="fedavg", rounds=2)
    finished = straight(config, tmp_path / "finished")
    with pytest.raises(ResumeError, match="is finished"):
        Experiment.resume(finished)
    assert main(["run", "--resume", str(finished)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {finished} is finished (2 rounds): there is nothing to resume"
    assert main(["run", "--resume", str(tmp_path / "nothing")]) == 2
    assert "is not a run folder" in capsys.readouterr().err
    assert main(["run", "--resume", str(finished), "--rounds", "5"]) == 2
    assert "nothing beside --resume DIR" in capsys.readouterr().err
    diverged = tmp_path / "diverged"
    Experiment(config.replace(lr=1e6), out_dir=diverged).run()
    with pytest.raises(ResumeError, match="diverged"):
        Experiment.resume(diverged)
    damaged = tmp_path / "damaged"
    shutil.copytree(finished, damaged)
    (damaged / "summary.json").unlink()
    (damaged / "config.json").write_text('{"algorithm": "fedavg", "rounds": "many"}')
    with pytest.raises(ResumeError, match="damaged"):
        Experiment.resume(damaged)


def test_stopping_and_resuming_in_the_api(tmp_path):
    config = ExperimentConfig(**SMALL, algorithm="fesem", models=3, rounds=5)
    folder = tmp_path / "x"
    calls = iter(range(100))
    assert Experiment(config, out_dir=folder).run(should_stop=lambda: next(calls) >= 2)["status"] == "stopped"
    exp = Experiment.resume(folder)
    assert exp.round == 2 and not (folder / "summary.json").exists()
    assert exp.run()["status"] == "finished"
    assert records(folder) == records(straight(config, tmp_path / "reference"))
    assert load_run(folder).meta["resumed"][0]["round"] == 2


def test_the_checkpoint_is_tensors_and_json_loaded_without_unpickling_objects(tmp_path):
    config = ExperimentConfig(**SMALL, algorithm="cfl", rounds=3)
    folder = straight(config, tmp_path / "x")
    data = torch.load(folder / "checkpoint.pt", weights_only=True)
    assert set(data) == {"format", "state", "tensors"} and data["format"] == 1
    assert all(isinstance(t, torch.Tensor) for t in data["tensors"].values())
    state = json.loads(data["state"])
    assert state["round"] == 3 and "nodes" in json.dumps(state["algorithm"])


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch boom-was-executed",))


def test_a_hostile_checkpoint_is_refused_never_executed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = ExperimentConfig(**SMALL, algorithm="fedavg", rounds=4)
    folder = tmp_path / "x"
    exp = Experiment(config, out_dir=folder)
    exp.step()
    torch.save({"format": 1, "state": "{}", "tensors": {"t0": _Boom()}}, folder / "checkpoint.pt")
    with pytest.raises(ResumeError, match="cannot be used"):
        Experiment.resume(folder)
    assert not (tmp_path / "boom-was-executed").exists()
