"""The generated contract, runs: every valid combination of settings runs, checkpoints and resumes identically.

For every registered algorithm Hypothesis draws whole configs from the settings declarations
(tests/contract_space.py: the experiment fields, the algorithm's Options, the shift's Options, a
profile, a protocol, newcomers, partial participation, unsupervised training) at small sizes, and
checks for each valid one:
- it runs to the end through the CLI (`run --config FILE`), writing a checkpoint after every round;
- a second run of the same config stopped after a drawn round (closed, or killed: no summary, and
  possibly with the next round's line written but not its checkpoint) and continued with
  `run --resume` writes records identical to the uninterrupted run's (so the same seed gives the
  same records, and the whole state goes through the checkpoint);
- the traffic ledger is consistent (whole floats, totals that add up, traffic where clients train).
A config the cross-field rules refuse must say which field (ConfigError naming a declared setting);
Hypothesis then draws another. `make test` runs a fixed, derandomised set (contract_space.RUN_EXAMPLES
per algorithm); `make fuzz` many more. Every combination found broken is pinned below as an example.
"""
from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import assume, event, given
from hypothesis import note as hypothesis_note
from hypothesis.errors import InvalidArgument
from hypothesis import strategies as st

from cfl_core.algorithms import ALGORITHMS
from cfl_core.cli import main
from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_core.records import CHECKPOINT_FILE, ROUNDS_FILE, SUMMARY_FILE
from tests.contract_space import experiment_configs, experiment_settings, option_settings, shift_settings

FLOAT_BYTES = 4


def note(text: str) -> None:
    """Hypothesis's note inside a generated example; nothing for the pinned ones (run outside Hypothesis)."""
    try:
        hypothesis_note(text)
    except InvalidArgument:
        pass


def outcome(text: str) -> None:
    """What an example exercised, for `--hypothesis-show-statistics` (nothing outside Hypothesis)."""
    try:
        event(text)
    except InvalidArgument:
        pass


def names_a_setting(exc: ConfigError, config: ExperimentConfig) -> bool:
    """The error names a declared field, an option of the algorithm or of the shift (or a fixed rule's name)."""
    head, _, tail = exc.parameter.partition(".")
    if head == "options":
        return tail in option_settings(config.algorithm)
    if head == "shift_options":
        return tail in shift_settings(config.shift)
    return head in experiment_settings()


def written(folder) -> list[dict]:
    out = [json.loads(line) for line in (folder / ROUNDS_FILE).read_text().splitlines()]
    for r in out:
        r.pop("seconds")
    return out


def summary(folder) -> dict:
    data = json.loads((folder / SUMMARY_FILE).read_text())
    data.pop("total_seconds")
    return data


def check_ledger(config: ExperimentConfig, records: list[dict], summary_: dict, model_bytes: int) -> None:
    """Bytes are whole float32 values, the summary's total adds the rounds up, and a federated algorithm that
    trains clients moves something up in every round (but in a phase it declares local: `local_phases`), and one
    that keeps shared models sends at least one down."""
    algo = ALGORITHMS[config.algorithm]
    total = 0
    for r in records:
        for key in ("bytes_down", "bytes_up"):
            assert isinstance(r[key], int) and r[key] >= 0 and r[key] % FLOAT_BYTES == 0, (key, r[key])
        total += r["bytes_down"] + r["bytes_up"]
        if config.algorithm != "local" and r["participants"] and r["phase"] not in algo.local_phases:
            assert r["bytes_up"] > 0, f"round {r['round']}: participants sent nothing back"
            if not algo.one_model_per_client:  # personalised models (FedProto) may receive nothing at first
                assert r["bytes_down"] >= model_bytes, f"round {r['round']}: participants trained on no model sent"
    assert summary_["total_bytes"] == total


def run_contract(config: ExperimentConfig, stop_after: int, killed: bool, torn: bool, tmp_path) -> None:
    note(f"config: {config.to_json()}")
    try:
        config.validate()
    except ConfigError as exc:
        assert names_a_setting(exc, config), f"a refused combination must name its field: {exc}"
        outcome(f"refused by the rules: {exc.parameter}")
        assume(False)  # a combination the cross-field rules forbid: draw another
    folder_a, folder_b = tmp_path / "whole", tmp_path / "stopped"
    for f in (folder_a, folder_b):
        shutil.rmtree(f, ignore_errors=True)
    config_file = tmp_path / "config.json"
    config_file.write_text(config.to_json())
    code = main(["run", "--config", str(config_file), "--out", str(folder_a)])
    whole = summary(folder_a)
    assert code == (0 if whole["status"] == "finished" else 1), whole
    records = written(folder_a) if (folder_a / ROUNDS_FILE).exists() else []
    assert (folder_a / CHECKPOINT_FILE).exists() == bool(records)  # a checkpoint after every finished round
    meta = json.loads((folder_a / "meta.json").read_text())
    if whole["status"] == "finished":
        assert len(records) == config.rounds
    check_ledger(config, records, whole, meta["model_bytes"])

    # the same config again, stopped (or killed) after `stop_after` rounds, then resumed from the CLI
    from cfl_core.experiment import Experiment

    stop_after = min(stop_after, len(records))
    if stop_after == 0:
        outcome("diverged in round 0: nothing to resume")
        return  # diverged in its first round (a learning rate too large for the drawn data): nothing to resume
    from cfl_core import checkpoint as ckpt

    exp = Experiment(config, out_dir=folder_b)
    for done in range(1, stop_after + 1):
        exp.step()
        tree, _ = ckpt.load(folder_b / CHECKPOINT_FILE)
        assert tree["round"] == done, "a checkpoint after every round"
    if killed:
        exp.writer.close()  # SIGKILL: no summary; the folder holds what the finished rounds wrote
        if torn and stop_after < len(records):
            # killed between the next round's line and its checkpoint: that round runs again
            with open(folder_b / ROUNDS_FILE, "a", encoding="utf-8") as fh:
                fh.write((folder_a / ROUNDS_FILE).read_text().splitlines()[stop_after] + "\n")
    else:
        exp.close()
    if stop_after == config.rounds and not killed:
        assert written(folder_b) == records  # finished: nothing to resume, and the same records
        outcome("ran twice to the end: the same records")
        return
    code = main(["run", "--resume", str(folder_b)])
    assert written(folder_b) == records, "a resumed run wrote other records than the uninterrupted one"
    assert summary(folder_b) == whole
    assert code == (0 if whole["status"] == "finished" else 1)
    outcome(f"{'killed' if killed else 'stopped'}{' (torn)' if torn else ''} and resumed: {whole['status']}")


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@given(data=st.data())
def test_every_valid_combination_runs_checkpoints_and_resumes_identically(algorithm, data, tmp_path):
    config, profile = data.draw(experiment_configs(algorithm), label="config")
    note(f"profile: {profile}")
    stop_after = data.draw(st.integers(1, config.rounds), label="stop after")
    killed = data.draw(st.booleans(), label="killed")
    torn = data.draw(st.booleans(), label="torn") if killed else False
    run_contract(config, stop_after, killed, torn, tmp_path)


# -- every algorithm under every declared partition and shift (folded in from test_new_algorithms_everywhere) ---
TINY = dict(dataset="digits", clusters=2, clients_per_cluster=3, samples_per_client=24, rounds=2, local_epochs=1,
            device="cpu")
PARTITIONS = experiment_settings()["partition"].choices
SHIFTS_DECLARED = [s for s in experiment_settings()["shift"].choices if s != "none"]


def _check_placed(records, n):
    for r in records:
        assert len(r.client_accuracy) == n and r.accuracy is not None
        assert all(a is not None for a, m in zip(r.client_accuracy, r.assignments) if m >= 0)


def _tiny(algorithm: str, **changes) -> ExperimentConfig:
    return ExperimentConfig(**{**TINY, "algorithm": algorithm, "models": 2, **changes})


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("partition", PARTITIONS)
def test_every_algorithm_runs_under_every_partition(algorithm, partition):
    from cfl_core.experiment import Experiment

    config = _tiny(algorithm, partition=partition)
    try:
        config.validate()
    except ConfigError as exc:  # a partition the bundled digits cannot make is refused by name, never mid-run
        assert names_a_setting(exc, config), exc
        return
    _check_placed(list(Experiment(config)), config.num_clients)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("shift", SHIFTS_DECLARED)
def test_every_shift_with_newcomers_and_partial_participation(algorithm, shift):
    from cfl_core.experiment import Experiment

    options = {"probability": 1.0} if "probability" in shift_settings(shift) else {}
    config = _tiny(algorithm, rounds=4, partition="label-skew-1", shift=shift, shift_options=options,
                   newcomer_share=0.34, newcomer_round=2, participation=0.7)
    records = list(Experiment(config))
    _check_placed(records, config.num_clients)
    assert records[2].extras.get("newcomers")


def test_run_and_compare_every_algorithm_from_the_command_line(tmp_path, capsys):
    base = ["--dataset", "digits", "--partition", "concept-shift", "--clusters", "2", "--clients-per-cluster", "2",
            "--samples-per-client", "20", "--rounds", "2", "--device", "cpu"]
    assert main(["run", "--algorithm", "pacfl", "--models", "2", "--option", "threshold=20", *base,
                 "--out", str(tmp_path / "one")]) == 0
    config = json.loads((tmp_path / "one" / "config.json").read_text())
    assert config["options"] == {"threshold": 20.0}
    names = sorted(ALGORITHMS)
    assert main(["compare", "--algorithms", ",".join(names), *base, "--executor", "serial",
                 "--out", str(tmp_path / "all")]) == 0
    table = (tmp_path / "all" / "compare.md").read_text()
    assert all(f"| {name} |" in table for name in names)
    for name in names:
        summary_ = json.loads((tmp_path / "all" / name / SUMMARY_FILE).read_text())
        assert summary_["status"] == "finished"
        assert (summary_["final_ari"] is None) == (not ALGORITHMS[name].has_clusters)


# -- every combination the contract found broken, pinned (each failed before its fix) ------------------------------
FOUND_BROKEN = {
    # CheckpointError after round 0: CFL's persistent optimiser state (both CFL profiles set it) was not checkpointable
    "cfl-persistent-optimizer-state": (dict(algorithm="cfl", options={"optimizer_state": "persistent"}), None),
    "cfl-authors-code-profile": (dict(algorithm="cfl"), "authors-code"),
    "cfl-paper-profile-adam": (dict(algorithm="cfl", optimizer="adam"), "paper"),
    # config.json kept 6 significant digits: a drawn lr of 0.1796875 came back as 0.179688, another config, and the
    # run could not be resumed ("checkpoint.pt belongs to another config")
    "float-with-7-digits": (dict(algorithm="fedavg", lr=0.1796875, momentum=0.123456789), None),
    # found by `make fuzz` (150 examples per algorithm):
    # an MLP on regression data (synthetic-linear) trained under cross-entropy: RuntimeError at the first step
    "mlp-regression": (dict(dataset="synthetic-linear", partition="iid", algorithm="ifca", models=1, model="mlp",
                            clients_per_cluster=2, samples_per_client=8, batch_size=4, lr=0.125, momentum=0.0), None),
    # FedGroup/FlexCFL with one cold-start client (m = 1, alpha = 1): TruncatedSVD refused a single update
    "fedgroup-one-cold-start-client": (dict(algorithm="fedgroup", models=1, options={"alpha": 1.0},
                                            partition="label-skew-1", clients_per_cluster=2, newcomer_share=0.5,
                                            newcomer_round=1), None),
    # ... and with measure=madc, AgglomerativeClustering refused it (found by a second `make fuzz`)
    "flexcfl-one-cold-start-client-madc": (dict(algorithm="flexcfl", models=1, options={"alpha": 1.0, "measure": "madc"},
                                                partition="label-skew-1", clients_per_cluster=2, newcomer_share=0.5,
                                                newcomer_round=1), None),
    # protocol flexcfl picked its best round on full-precision values in a run that never stopped, on the folder's
    # 6 digits in a resumed one: two rounds equal to 6 digits gave another reported_round after a resume
    "flexcfl-protocol-best-round-tie": (dict(algorithm="fedgroup", models=1, partition="label-skew-1",
                                             clients_per_cluster=2, samples_per_client=8, num_classes_per_partition=1,
                                             alpha=1.0, batch_size=4, lr=0.03125, momentum=0.0, protocol="flexcfl",
                                             participation=1.0, rounds=2), None),
}


@pytest.mark.parametrize("name", sorted(FOUND_BROKEN))
@pytest.mark.parametrize("killed, torn", [(False, False), (True, True)])
def test_the_combinations_found_broken_run_and_resume(name, killed, torn, tmp_path):
    fields, profile = FOUND_BROKEN[name]
    config = ExperimentConfig(**{**TINY, "rounds": 3, "participation": 0.7, **fields})
    if profile is not None:
        from cfl_core.profiles import apply_profile

        config, _ = apply_profile(config, profile, keep={"rounds", "dataset", "device"})
    run_contract(config, 1, killed, torn, tmp_path)


@pytest.mark.parametrize("dataset, model", [("synthetic-linear", "logreg"), ("synthetic-linear", "cnn"),
                                            ("digits", "linreg"), ("synthetic-blobs", "cnn")])
def test_a_model_that_does_not_fit_the_data_is_refused_by_validate(dataset, model, tmp_path, capsys):
    """Found broken: these passed validate() and failed only when the run was built (its folder already made)."""
    config = ExperimentConfig(**{**TINY, "dataset": dataset, "partition": "iid", "model": model, "algorithm": "fedavg"})
    with pytest.raises(ConfigError) as err:
        config.validate()
    assert err.value.parameter == "model"
    out = tmp_path / "run"
    assert main(["run", "--dataset", dataset, "--partition", "iid", "--model", model, "--algorithm", "fedavg",
                 "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("error: model=")
    assert not out.exists()


def _profiled() -> list[str]:
    from cfl_core.profiles import TABLE

    return sorted({algorithm for algorithm, _ in TABLE})


@pytest.mark.parametrize("algorithm", _profiled())
def test_a_profile_run_killed_with_sigkill_resumes_identically(algorithm, tmp_path):
    """A real SIGKILL of every algorithm's authors'-code profile run (which checkpoints what the defaults never
    do: CFL's persistent optimiser state and per-participation decay, FlexCFL's first-selected cold starts and
    round-robin selection), resumed from the CLI: the records and the summary of a run that never stopped."""
    import multiprocessing
    import os
    import signal
    import time

    from cfl_core.experiment import Experiment
    from cfl_core.profiles import apply_profile
    from tests.test_algorithm_contract import _train_slowly

    config, _ = apply_profile(ExperimentConfig(**{**TINY, "clients_per_cluster": 5, "algorithm": algorithm,
                                                  "models": 2, "rounds": 8}), "authors-code",
                              keep={"rounds", "dataset", "device"})
    config = config.replace(participation=0.5)  # partial participation: round-robin and per-participation decay act
    folder = tmp_path / "killed"
    child = multiprocessing.get_context("fork").Process(target=_train_slowly, args=(config, folder))
    child.start()
    try:
        deadline = time.time() + 120
        while time.time() < deadline and child.is_alive():
            lines = folder / ROUNDS_FILE
            if lines.exists() and lines.read_text().count("\n") >= 3:
                break
            time.sleep(0.005)
        time.sleep(0.1)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.join(30)
    assert child.exitcode == -signal.SIGKILL, "the run must still be going when it is killed"
    assert 3 <= len(written(folder)) < config.rounds and not (folder / SUMMARY_FILE).exists()
    assert main(["run", "--resume", str(folder)]) == 0
    Experiment(config, out_dir=tmp_path / "whole").run()
    assert written(folder) == written(tmp_path / "whole")
    assert summary(folder) == summary(tmp_path / "whole")
