"""The peer benchmark's parts that need no peer framework, and `sample_with_replacement`.

CI installs only requirements.txt and requirements-test.txt: nothing here imports flwr or pfl.
"""
from __future__ import annotations

import numpy as np
import pytest

from cfl_core.config import ExperimentConfig
from cfl_core.data import dataset_info, load_dataset
from cfl_core.errors import ConfigError
from cfl_core.partition import PartitionConfig, build_partition
from cfl_core.settings import settings_of


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


# -- sample_with_replacement ---------------------------------------------------------------------------
def test_without_replacement_the_small_pool_is_refused_with_the_existing_message():
    # 100 clients x 80 digits is 8,000 samples; the train pool has 1,346
    config = PartitionConfig("digits", "iid", clusters=1, clients_per_cluster=100, samples_per_client=80)
    with pytest.raises(ConfigError) as caught:
        config.validate(dataset_info("digits"))
    error = caught.value
    assert error.parameter == "samples_per_client" and error.value == 80
    assert "at most 13 for iid with 1 clusters x 100 clients on digits without drawing a sample twice" in str(error)
    assert "sample_with_replacement" in str(error)  # and it names the way out
    with pytest.raises(ConfigError, match="clients_per_cluster.*sample_with_replacement"):
        PartitionConfig("digits", "iid", clusters=50, clients_per_cluster=50,
                        samples_per_client=1).validate(dataset_info("digits"))


def test_with_replacement_any_size_is_served(digits):
    config = PartitionConfig("digits", "feature-skew", clusters=4, clients_per_cluster=50, samples_per_client=80,
                             test_samples_per_client=40, sample_with_replacement=True)
    config.validate(dataset_info("digits"))
    part = build_partition(digits, config)
    assert len(part.clients) == 200
    pooled = np.concatenate([c.train_idx for c in part.clients])
    assert len(pooled) == 200 * 80 > digits.info.n_train  # more than the pool: clients share samples
    for c in part.clients:
        assert len(c.train_idx) == 80 and len(np.unique(c.train_idx)) == 80  # no repeats inside a client
        assert len(c.test_idx) == 40
        assert sum(c.label_counts) == 80
        assert np.array_equal(np.bincount(digits.y_train.numpy()[c.train_idx], minlength=10), c.label_counts)
    assert part.to_json()["config"]["sample_with_replacement"] is True
    data = part.materialize(digits)
    assert tuple(data[0].x_train.shape) == (80, 1, 8, 8)


def test_with_replacement_is_deterministic_and_seeded(digits):
    config = PartitionConfig("digits", "iid", clusters=2, clients_per_cluster=30, samples_per_client=80,
                             sample_with_replacement=True, seed=3)
    a, b = build_partition(digits, config), build_partition(digits, config)
    assert all(np.array_equal(x.train_idx, y.train_idx) for x, y in zip(a.clients, b.clients))
    c = build_partition(digits, PartitionConfig(**{**config.__dict__, "seed": 4}))
    assert any(not np.array_equal(x.train_idx, y.train_idx) for x, y in zip(a.clients, c.clients))


def test_with_replacement_a_client_larger_than_a_class_gets_repeats(digits):
    # 400 samples of one class per client (label-skew-1: two labels per cluster) exceed any class's ~135 members
    config = PartitionConfig("digits", "label-skew-1", clusters=5, clients_per_cluster=2, samples_per_client=400,
                             sample_with_replacement=True)
    config.validate(dataset_info("digits"))
    part = build_partition(digits, config)
    for c in part.clients:
        assert len(c.train_idx) == 400
        labels = digits.y_train.numpy()[c.train_idx]
        assert set(np.unique(labels)) <= {2 * c.cluster, 2 * c.cluster + 1}
        for label in np.unique(labels):  # every member of the class first, then repeats
            members = np.flatnonzero(digits.y_train.numpy() == label)
            held = c.train_idx[labels == label]
            if len(held) >= len(members):
                assert set(held) == set(members)


def test_the_setting_is_declared_once_and_reaches_config_cli_and_url():
    declared = settings_of(ExperimentConfig)["sample_with_replacement"]
    assert declared == settings_of(PartitionConfig)["sample_with_replacement"]
    assert declared.kind is bool and declared.default is False and declared.flag_name == "--sample-with-replacement"
    config = ExperimentConfig.from_dict({"sample_with_replacement": "true", "clients_per_cluster": "250",
                                         "samples_per_client": "80", "models": "4"}, text=True)
    assert config.sample_with_replacement is True and config.partition_config().sample_with_replacement is True
    config.validate()
    assert config.data_key() != config.replace(sample_with_replacement=False).data_key()
    with pytest.raises(ConfigError, match="sample_with_replacement"):
        ExperimentConfig.from_dict({"sample_with_replacement": "yes"})
    with pytest.raises(ConfigError, match="samples_per_client=80"):
        config.replace(sample_with_replacement=False).validate()


# -- the peer benchmark's orchestration ----------------------------------------------------------------
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from cfl_core.bench import peer_report, peers  # noqa: E402
from cfl_core.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# tests run beside anything: the busy gate is tested on its own, with a fake machine load (test_bench_peer_runs.py)
TINY = dict(sizes=(8,), rounds=2, cfl_rounds=2, warmup=1, clove_clients=8, threads=1, time_limit=60,
            repetitions=2, busy_above=1e9, quiet_sample=0.05)


def quiet(*_):
    pass


def _peer_common():
    sys.path.insert(0, str(REPO / "benchmarks" / "peers"))
    try:
        import common
    finally:
        sys.path.pop(0)
    return common


def test_the_identical_data_is_deterministic_and_what_cfl_lab_trains_on(tmp_path):
    opts = peers.PeerOptions(**TINY)
    config = peers.workload_config(12, "fedavg", opts)
    assert config.sample_with_replacement and config.samples_per_client == 80
    a = peers.write_workload(tmp_path / "a.npz", peers.build_experiment(config), opts)
    b = peers.write_workload(tmp_path / "b.npz", peers.build_experiment(config), opts)
    with np.load(a) as fa, np.load(b) as fb:
        assert set(fa.files) == {"x_train", "y_train", "x_test", "y_test", "init", "clusters", "workload"}
        for name in fa.files:
            assert np.array_equal(fa[name], fb[name]), name
        assert fa["x_train"].shape == (12, 80, 64) and fa["x_train"].dtype == np.float32
        assert fa["y_train"].shape == (12, 80) and fa["x_test"].shape == (12, 40, 64)
        assert fa["init"].shape == (1, 64 * 128 + 128 + 128 * 10 + 10)
        spec = json.loads(str(fa["workload"]))
        assert (spec["lr"], spec["batch_size"], spec["local_epochs"]) == (0.05, 10, 1)
    exp = peers.build_experiment(config)
    with np.load(a) as fa:
        assert np.array_equal(fa["x_train"], exp.federation.x_train.reshape(12, 80, 64).numpy())
        assert np.array_equal(fa["init"], exp.models_snapshot().numpy())
    # the peers' reading of the file gives the very model CFL Lab starts from
    w = _peer_common().Workload(str(a))
    x = w.x_test[0]
    with torch.no_grad():
        ours = exp.spec.forward(exp.models_snapshot(), x[None].reshape(1, 40, 1, 8, 8))[0]
        theirs = w.model(0)(x)
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_cfl_lab_rows_run_at_tiny_m(tmp_path):
    opts = peers.PeerOptions(**TINY)
    rows = peers.cfl_rows(8, opts, "fedavg", quiet, workload_path=tmp_path / "w.npz")
    assert [r.variant for r in rows] == ["engine (train + average)", "Experiment.step()", "step() + run folder"]
    assert all(r.seconds > 0 and r.framework == "CFL Lab" and r.rounds == "1 of 2" for r in rows)
    assert rows[1].accuracy is not None and rows[1].accuracy == rows[2].accuracy  # the same run, twice
    assert (tmp_path / "w.npz").exists()
    # where a step's time goes: the round and the evaluation as the row's parts, the rest as phases
    step, folder = rows[1], rows[2]
    assert 0 < step.train_seconds < step.seconds and 0 < step.eval_seconds < step.seconds
    assert set(step.phases) == {"record_seconds"}
    assert set(folder.phases) == {"record_seconds", "rounds_jsonl_seconds", "checkpoint_seconds"}
    assert step.train_seconds + step.eval_seconds + step.phases["record_seconds"] <= step.seconds
    clove = peers.cfl_rows(8, opts, "clove", quiet)
    assert clove[0].models == 4 and clove[1].ari is not None


def test_a_missing_peer_environment_is_one_clear_message(tmp_path, capsys):
    rc = main(["bench", "--peers", "flower,pfl", "--peer-python", str(tmp_path / "nope" / "python")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert err.strip().count("\n") == 0 and err.startswith("error: the peers' Python")
    assert "does not exist" in err and "make bench-peers" in err
    # an interpreter without the frameworks (the app's own, as in CI)
    rc = main(["bench", "--peers", "flower", "--peer-python", sys.executable])
    err = capsys.readouterr().err
    assert rc == 2 and "lacks flwr" in err and "Traceback" not in err
    assert main(["bench", "--peers", "flwr"]) == 2 and "not a peer" in capsys.readouterr().err


def _result(rounds, **extra):
    doc = {"framework": "pfl", "algorithm": "fedavg", "clients": 8, "models": 1, "setup": {"processes": 1},
           "versions": {"pfl": "0.6.0", "torch": "2.14.1"}, "rounds": rounds, "warmup_rounds": 1,
           "other_cpus": 0.05, "startup_seconds": 3.5, "includes": "one central iteration", "finished": True}
    doc.update(extra)
    return doc


def test_a_peers_json_output_becomes_a_row():
    rounds = [{"seconds": 9.0, "train_seconds": 8.0, "eval_seconds": 1.0, "accuracy": 0.2},
              {"seconds": 2.0, "train_seconds": 1.5, "eval_seconds": 0.4, "accuracy": 0.5},
              {"seconds": 4.0, "train_seconds": 3.5, "eval_seconds": 0.4, "accuracy": 0.6},
              {"seconds": 3.0, "train_seconds": 2.5, "eval_seconds": 0.6, "accuracy": 0.7}]
    opts = peers.PeerOptions(rounds=4)
    row = peers.row_from_result("pfl", "1 process x 2 threads", "fedavg", 8, 1,
                                _result(rounds, final_accuracy=0.72, final_accuracy_after=4), opts)
    assert row.seconds == 3.0 and row.train_seconds == 2.5 and row.eval_seconds == 0.4  # medians, warm-up out
    assert row.rounds == "3 of 4" and row.accuracy == 0.72 and row.accuracy_after == 4
    assert row.other_cpus == 0.05 and row.startup_seconds == 3.5 and row.versions["pfl"] == "0.6.0"
    assert row.status == "ok"
    assert peers.row_from_result("flower", "x", "fedavg", 8, 1, None, opts).status == "no result written"
    one = peers.row_from_result("flower", "x", "fedavg", 8, 1, _result(rounds[:1]), opts)
    assert one.seconds is None and "only the warm-up round" in one.note
    # ratios against CFL Lab's rows of the same size
    step = peers.PeerRow("CFL Lab", "Experiment.step()", "fedavg", 8, 1, 0.5)
    engine = peers.PeerRow("CFL Lab", "engine (train + average)", "fedavg", 8, 1, 0.25)
    assert peer_report.ratios([step, engine, row], row) == (6.0, 10.0)


FAKE_PEER = textwrap.dedent("""
    import argparse, json, sys, time
    p = argparse.ArgumentParser()
    for flag in ("--data", "--out", "--algorithm", "--rounds", "--warmup", "--time-limit", "--min-rounds",
                 "--threads"):
        p.add_argument(flag)
    a = p.parse_args()
    if "--sleep" in open(a.data).read():
        time.sleep(60)
    rounds = [{"seconds": 0.5 - 0.1 * r, "train_seconds": 0.2, "eval_seconds": 0.1, "accuracy": 0.5}
              for r in range(int(a.rounds))]
    json.dump({"framework": "pfl", "rounds": rounds, "warmup_rounds": int(a.warmup), "finished": True,
               "other_cpus": 0.0, "versions": {"pfl": "fake"}, "includes": "fake"}, open(a.out, "w"))
    # as pfl_fedavg.py: which users this (only) worker simulated in each central iteration
    users = {str(r): {"TRAIN": list(range(8)), "VAL": list(range(8))} for r in range(int(a.rounds))}
    json.dump({"rank": 0, "world": 1, "iterations": users}, open(a.out + ".users.rank0.json", "w"))
""")


def test_run_peer_spawns_the_script_reads_its_json_and_stops_it_at_the_limit(tmp_path, monkeypatch):
    script = tmp_path / "fake_peer.py"
    script.write_text(FAKE_PEER)
    monkeypatch.setitem(peers.PEER_SCRIPTS, "pfl", str(script))
    data = tmp_path / "data.txt"
    data.write_text("go")
    opts = peers.PeerOptions(rounds=3, time_limit=30)
    row = peers.run_peer(opts, "pfl", "1x2", data, "fedavg", 8, 1, Path(sys.executable), tmp_path, quiet)
    assert row.status == "ok" and row.rounds == "2 of 3" and abs(row.seconds - 0.35) < 1e-9
    data.write_text("--sleep")
    opts = peers.PeerOptions(rounds=3, time_limit=2)
    row = peers.run_peer(opts, "pfl", "1x2", data, "fedavg", 8, 1, Path(sys.executable), tmp_path, quiet)
    assert row.status.startswith("stopped at the time limit") and row.seconds is None


def test_the_benchmark_without_peers_writes_its_table(tmp_path):
    opts = peers.PeerOptions(peers=(), **TINY)
    report = peers.run_peer_benchmark(opts, log=quiet)
    assert {(r.algorithm, r.clients) for r in report.rows} == {("fedavg", 8), ("clove", 8)}
    out = tmp_path / "PEERS.md"
    out.write_text("old table\n" + peer_report.NOTES_MARKER + "\nhand-written notes\n")
    peer_report.write_markdown(report, "python -m cfl_core bench --peers flower,pfl", out)
    text = out.read_text()
    assert "old table" not in text and text.endswith("hand-written notes\n")
    assert "| fedavg | 8 | CFL Lab | Experiment.step() |" in text and "Learning check" in text
    peer_report.write_json(report, tmp_path / "peers.json")
    assert len(json.loads((tmp_path / "peers.json").read_text())["rows"]) == 6


def test_a_size_is_skipped_when_smaller_ones_show_it_cannot_finish():
    opts = peers.PeerOptions(rounds=4, time_limit=600)
    rows = [peers.PeerRow("flower", "num_cpus=1", "fedavg", 100, 1, 0.5, startup_seconds=20),
            peers.PeerRow("flower", "num_cpus=1", "fedavg", 1000, 1, 10.0, startup_seconds=20)]
    note = peers._predicted_too_slow(rows, "flower", "fedavg", 10000, opts)
    assert note and "M^1.30" in note and "over the 600 s limit" in note
    assert peers._predicted_too_slow(rows[:1], "flower", "fedavg", 1000, opts) is None
    slow = [peers.PeerRow("flower", "num_cpus=1", "fedavg", 100, 1, 500.0)]
    assert peers._predicted_too_slow(slow, "flower", "fedavg", 1000, opts) is None  # up to 1000 always runs
    assert peers._predicted_too_slow(rows, "pfl", "fedavg", 10000, opts) is None


def test_large_rows_run_only_the_setup_that_was_fastest_below():
    rows = [peers.PeerRow("pfl", "1 process x 2 threads", "fedavg", 1000, 1, 3.0),
            peers.PeerRow("pfl", "2 processes x 1 thread", "fedavg", 1000, 1, 1.5)]
    assert peers.setups_to_run(rows, "pfl", 100, ["1x2", "2x1"]) == (["1x2", "2x1"], "")
    # FedAvg up to M = 1000 runs every setup: the table has both pfl setups at M = 100 and 1,000
    assert peers.setups_to_run(rows, "pfl", 1000, ["1x2", "2x1"]) == (["1x2", "2x1"], "")
    chosen, why = peers.setups_to_run(rows, "pfl", 10000, ["1x2", "2x1"])
    assert chosen == ["2x1"] and "fastest at M=1000" in why and "2.0x slower" in why
    # the CLoVE row (after FedAvg at its size) runs the setup fastest in FedAvg at that size
    chosen, why = peers.setups_to_run(rows, "pfl", 1000, ["1x2", "2x1"], algorithm="clove")
    assert chosen == ["2x1"] and "fastest at M=1000" in why


def test_profile_summary_reads_py_spy_raw_stacks():
    raw = "\n".join([
        'process 1:"python flower_fedavg.py";main (a.py:1);run (b.py:2);dispatch (c.py:3) 70',
        'process 1:"python flower_fedavg.py";main (a.py:1);run (b.py:2);poll (c.py:9) 30',
        'process 1:"python flower_fedavg.py";_find_and_load (<frozen importlib._bootstrap>:1) 500',
        'process 1:"python flower_fedavg.py";process 2:"python default_worker.py";loop (w.py:1);fit (f.py:1) 10',
    ])
    summary = peers.summarize_profile(raw)
    driver = summary["Flower driver (ServerApp + simulation engine) (pid 1)"]
    assert driver["samples"] == 100  # imports left out
    assert driver["top"][0] == ["dispatch (c.py:3)", 0.7] and ["poll (c.py:9)", 0.3] in driver["top"]
    assert summary["Ray worker (ClientApp actor) (pid 2)"]["leaves"] == [["fit (f.py:1)", 1.0]]


def test_peer_scripts_are_outside_the_library_and_cfl_core_never_imports_them():
    for path in (REPO / "cfl_core").rglob("*.py"):
        text = path.read_text()
        assert "import flwr" not in text and "from flwr" not in text, path
        assert "import pfl" not in text and "from pfl" not in text, path
    for script in peers.PEER_SCRIPTS.values():
        assert (REPO / script).exists() and script.startswith("benchmarks/peers/")
    # the scripts parse without their frameworks (imports happen inside main)
    for script in peers.PEER_SCRIPTS.values():
        subprocess.run([sys.executable, "-m", "py_compile", str(REPO / script)], check=True)


def test_learning_check_compares_after_equal_rounds_and_a_saved_run_renders_again(tmp_path):
    rows = [peers.PeerRow("CFL Lab", "Experiment.step()", "fedavg", 1000, 1, 0.2, accuracy=0.822, accuracy_after=4),
            peers.PeerRow("flower", "num_cpus=1 per client", "fedavg", 1000, 1, None, accuracy=0.509, accuracy_after=1),
            peers.PeerRow("pfl", "2 processes x 1 thread", "fedavg", 1000, 1, 2.0, accuracy=0.823, accuracy_after=4)]
    (line,) = peer_report.learning_check(rows)
    assert "after 4 rounds" in line and "spread 0.1 points, within 3" in line
    assert "flower finished only 1 round(s)" in line
    report = peers.PeerReport({"cpu": "x", "cpu_count": 2, "python": "3", "load_before": "1", "load_after": "1",
                               "other_cpus": 0.1}, peers.PeerOptions(), rows)
    peer_report.write_json(report, tmp_path / "r.json")
    again = peer_report.report_from_json(tmp_path / "r.json")
    assert again.rows == rows and again.options == peers.PeerOptions()


def test_every_row_runs_pfl_before_flower_whatever_order_peers_names(monkeypatch):
    # a run stopped at Flower's time limit must already hold the row's pfl part
    calls = []

    def fake_run_peer(opts, framework, variant, data, algorithm, clients, models, python, workdir, log):
        calls.append((algorithm, clients, framework))
        return peers.PeerRow(framework, variant, algorithm, clients, models, 1.0)

    monkeypatch.setattr(peers, "check_peer_environment", lambda opts: Path(sys.executable))
    monkeypatch.setattr(peers, "run_peer", fake_run_peer)
    opts = peers.PeerOptions(peers=("flower", "pfl"), **TINY)
    peers.run_peer_benchmark(opts, log=quiet)
    for row in {(a, m) for a, m, _ in calls}:
        order = [f for a, m, f in calls if (a, m) == row]
        assert order.index("pfl") < order.index("flower"), (row, order)
    assert {(a, m) for a, m, _ in calls} == {("fedavg", 8), ("clove", 8)}
    assert peers.peers_in_order(("flower", "other", "pfl")) == ["pfl", "flower", "other"]
