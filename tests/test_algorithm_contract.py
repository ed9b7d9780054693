"""The contract every registered algorithm keeps, checked for each one alike (a new algorithm is covered by registering it)."""
from __future__ import annotations

import json

import pytest

from cfl_core.algorithms import ALGORITHMS
from cfl_core.cli import build_parser
from cfl_core.cli.run_cmd import config_from_args
from cfl_core.config import ExperimentConfig
from cfl_core.experiment import Experiment
from cfl_core.settings import settings_of

SMALL = dict(dataset="digits", partition="feature-skew", clusters=3, clients_per_cluster=4, samples_per_client=30,
             local_epochs=1, device="cpu")


def config_for(name: str, **changes) -> ExperimentConfig:
    return ExperimentConfig(**{**SMALL, "algorithm": name, "models": 3 if ALGORITHMS[name].needs_models else None,
                               **changes})


def records_of(config: ExperimentConfig) -> list[dict]:
    exp = Experiment(config)
    out = [json.loads(r.to_json()) for r in exp]
    exp.close()
    for r in out:
        r.pop("seconds")
    return out


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_client_is_placed_or_marked_under_newcomers_and_partial_participation(name):
    config = config_for(name, rounds=5, participation=0.5, newcomer_share=0.25, newcomer_round=2)
    exp = Experiment(config)
    joins = exp.joins.tolist()
    for record in exp:
        n = config.num_clients
        assert len(record.assignments) == n and len(record.client_accuracy) == n
        assert set(record.participants) <= {c for c in range(n) if joins[c] <= record.round}
        for c in range(n):
            model = record.assignments[c]
            if joins[c] > record.round:
                assert model == -1, f"{name}: client {c} has a model before it joined"
            if model == -1:
                assert record.client_accuracy[c] is None  # no model, no score
            else:
                assert 0 <= model and record.client_accuracy[c] is not None
        for c in record.participants:
            assert record.assignments[c] >= 0, f"{name}: participant {c} trained no model"
        assert record.evaluated == sum(a >= 0 for a in record.assignments)
        assert record.bytes_down >= 0 and record.bytes_up >= 0
    exp.close()


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_the_same_config_and_seed_give_the_same_records(name):
    config = config_for(name, rounds=3, newcomer_share=0.25, newcomer_round=1)
    assert records_of(config) == records_of(config)
    assert records_of(config) != records_of(config.replace(seed=1))


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_a_run_stopped_after_any_round_resumes_with_identical_records(name, tmp_path):
    """The algorithm's whole state goes through the checkpoint (Algorithm.state_dict): no override needed."""
    config = config_for(name, rounds=5, participation=0.75, newcomer_share=0.25, newcomer_round=2)
    reference = Experiment(config, out_dir=tmp_path / "reference")
    reference.run()
    for stop_after in (1, 3):
        folder = tmp_path / f"stopped-{stop_after}"
        exp = Experiment(config, out_dir=folder)
        for _ in range(stop_after):
            exp.step()
        exp.close()  # status stopped
        resumed = Experiment.resume(folder)
        assert resumed.round == stop_after
        resumed.run()
        assert written(folder) == written(tmp_path / "reference"), f"{name}: resumed after round {stop_after - 1}"


def _train_slowly(config: ExperimentConfig, folder) -> None:
    """A child's whole life: the run, a pause after each round so that the parent's SIGKILL lands mid-run."""
    import time

    Experiment(config, out_dir=folder).run(on_round=lambda record: time.sleep(0.2))


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_a_run_killed_with_sigkill_mid_way_resumes_with_identical_records(name, tmp_path):
    """SIGKILL (no handler, no summary, possibly mid-round or mid-write), then resume: every record but timings
    equals an uninterrupted run's, and so does the summary."""
    import multiprocessing
    import os
    import signal
    import time

    config = config_for(name, rounds=10, participation=0.75, newcomer_share=0.25, newcomer_round=2)
    folder = tmp_path / "killed"
    child = multiprocessing.get_context("fork").Process(target=_train_slowly, args=(config, folder))
    child.start()
    try:
        deadline = time.time() + 120
        while time.time() < deadline and child.is_alive():
            lines = folder / "rounds.jsonl"
            if lines.exists() and lines.read_text().count("\n") >= 3:
                break
            time.sleep(0.005)
        time.sleep(0.1)  # somewhere in the next round, its record or its checkpoint
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.join(30)
    assert child.exitcode == -signal.SIGKILL, "the run must still be going when it is killed"
    assert 3 <= len(written(folder)) < 10 and not (folder / "summary.json").exists()
    Experiment.resume(folder).run()
    reference = Experiment(config, out_dir=tmp_path / "reference")
    reference.run()
    assert written(folder) == written(tmp_path / "reference")
    summaries = [json.loads((f / "summary.json").read_text()) for f in (folder, tmp_path / "reference")]
    for s in summaries:
        s.pop("total_seconds")
    assert summaries[0] == summaries[1]


def written(folder) -> list[dict]:
    out = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    for r in out:
        r.pop("seconds")
    return out


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_options_round_trip_through_the_cli_and_a_config_file(name, tmp_path):
    declared = settings_of(ALGORITHMS[name].Options)
    given = {}
    for s in declared.values():  # a non-default value of every option, where one is allowed alone
        if s.choices:
            given[s.name] = next((v for v in s.choices if v != s.default), s.default)
        elif s.kind is bool:
            given[s.name] = not s.default
    flags = ["run", "--algorithm", name, "--out", str(tmp_path / "x")]
    for key, value in given.items():
        flags += ["--option", f"{key}={declared[key].to_text(value)}"]
    args = build_parser().parse_args(flags)
    from_cli = config_from_args(args, validate=False)
    assert from_cli.options == given
    again = ExperimentConfig.from_dict(json.loads(from_cli.to_json()))
    assert again == from_cli
    assert ALGORITHMS[name].parse_options(again.options) == ALGORITHMS[name].Options(**given)
