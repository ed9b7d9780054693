"""The last rule differences from the authors' code, each an option with the authors' variant in the
`authors-code` profile (docs/faithfulness.md), the protocol column of `compare --profile`, and the training
path and thread count every run records."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cfl_core.cli import main
from cfl_core.compare import compare_table
from cfl_core.config import ExperimentConfig
from cfl_core.experiment import Experiment
from cfl_core.profiles import apply_profile

SMALL = dict(dataset="digits", partition="concept-shift", clusters=2, clients_per_cluster=4, samples_per_client=20,
             local_epochs=1, device="cpu")


def records(config) -> list[dict]:
    out = [json.loads(r.to_json()) for r in Experiment(config)]
    for r in out:
        r.pop("seconds")
    return out


# -- Sattler's CFL: the learning rate decays per participation in the authors' code ----------------------------
def test_cfl_lr_decay_per_participation_is_the_per_round_schedule_under_full_participation():
    base = ExperimentConfig(**SMALL, algorithm="cfl", rounds=3, options={"lr_decay": 0.9})
    per = base.replace(options={"lr_decay": 0.9, "lr_decay_per": "participation"})
    assert records(per) == records(base)


def test_cfl_lr_decay_per_participation_follows_each_clients_own_count(monkeypatch):
    from cfl_core.engine.core import Engine

    seen: list[tuple[list[int], float]] = []
    original = Engine.federated_train

    def spy(self, models, clients, model_of, round_index, train=None, **kw):
        seen.append((clients.tolist(), (train or self.train_cfg).lr))
        return original(self, models, clients, model_of, round_index, train=train, **kw)

    monkeypatch.setattr(Engine, "federated_train", spy)
    config = ExperimentConfig(**SMALL, algorithm="cfl", rounds=4, participation=0.5, lr=0.1,
                              options={"lr_decay": 0.5, "lr_decay_per": "participation", "warmup_rounds": 100})
    exp = Experiment(config)
    counts = np.zeros(config.num_clients, dtype=int)
    for _ in range(config.rounds):
        seen.clear()
        record = exp.step()
        lr_of = {c: lr for clients, lr in seen for c in clients}
        assert sorted(lr_of) == record.participants
        for c in record.participants:
            counts[c] += 1
            assert lr_of[c] == pytest.approx(0.1 * 0.5 ** counts[c]), (record.round, c)
    assert len(set(counts.tolist())) > 1  # partial participation: the counts differ, and so did the rates


def test_cfl_authors_code_profile_decays_per_participation_and_runs_from_the_cli(tmp_path):
    """The reported failure: `run --algorithm cfl --profile authors-code` died after round 0 (CheckpointError on
    the persistent optimiser state); it runs, and resumes, now."""
    cfg, _ = apply_profile(ExperimentConfig(**SMALL, algorithm="cfl"), "authors-code")
    assert cfg.options["lr_decay_per"] == "participation" and cfg.options["optimizer_state"] == "persistent"
    flags = ["--algorithm", "cfl", "--profile", "authors-code", "--dataset", "digits", "--clusters", "2",
             "--clients-per-cluster", "4", "--samples-per-client", "20", "--rounds", "3", "--device", "cpu"]
    assert main(["run", *flags, "--out", str(tmp_path / "whole")]) == 0
    exp = Experiment(ExperimentConfig.from_dict(json.loads((tmp_path / "whole" / "config.json").read_text())),
                     out_dir=tmp_path / "stopped")
    exp.step()
    exp.close()
    assert main(["run", "--resume", str(tmp_path / "stopped")]) == 0
    for name in ("rounds.jsonl",):
        whole = [json.loads(line) for line in (tmp_path / "whole" / name).read_text().splitlines()]
        again = [json.loads(line) for line in (tmp_path / "stopped" / name).read_text().splitlines()]
        for r in whole + again:
            r.pop("seconds")
        assert again == whole


# -- FlexCFL: round-robin selection first, KMeans max_iter -------------------------------------------------------
def test_flexcfl_round_robin_selects_clients_in_order_until_everyone_took_part():
    config = ExperimentConfig(**{**SMALL, "clients_per_cluster": 10}, algorithm="flexcfl", models=2, rounds=8,
                              participation=0.3, options={"selection": "round-robin"})
    got = [r.participants for r in Experiment(config)]
    n, count = config.num_clients, round(0.3 * config.num_clients)  # 20 clients, 6 a round: 4 round-robin rounds
    for r in range(4):
        assert got[r] == sorted(((r * count + np.arange(count)) % n).tolist()), r
    assert set().union(*got[:4]) == set(range(n))  # everyone by round 3 (at random: not guaranteed)
    plain = [r.participants for r in Experiment(config.replace(options={}))]
    assert got[4:] == plain[4:]  # then the run's random draw, as every algorithm's


def test_flexcfl_authors_code_profile_sets_round_robin_and_kmeans_max_iter(monkeypatch):
    import sklearn.cluster

    cfg, note = apply_profile(ExperimentConfig(**SMALL, algorithm="flexcfl", models=2), "authors-code")
    assert cfg.options["selection"] == "round-robin" and cfg.options["kmeans_max_iter"] == 20
    paper, _ = apply_profile(ExperimentConfig(**SMALL, algorithm="fedgroup", models=2), "paper")
    assert "selection" not in paper.options and "kmeans_max_iter" not in paper.options
    used = []
    original = sklearn.cluster.KMeans

    def spy(*args, **kw):
        used.append(kw.get("max_iter"))
        return original(*args, **kw)

    monkeypatch.setattr(sklearn.cluster, "KMeans", spy)
    list(Experiment(cfg.replace(rounds=1)))
    assert used == [20]
    used.clear()
    list(Experiment(ExperimentConfig(**SMALL, algorithm="flexcfl", models=2, rounds=1)))
    assert used == [300]


# -- CLoVE: the paper profile of an unsupervised run ---------------------------------------------------------------
def test_clove_paper_profile_takes_the_autoencoder_settings_when_unsupervised():
    supervised, _ = apply_profile(ExperimentConfig(**SMALL, algorithm="clove", models=2), "paper")
    assert supervised.lr == 0.01 and supervised.options["first_assignment"] == "random"
    unsupervised, note = apply_profile(ExperimentConfig(**SMALL, algorithm="clove", models=2, unsupervised=True),
                                       "paper")
    assert unsupervised.lr == 1e-3 and unsupervised.options["first_assignment"] == "evaluation"
    assert "autoencoder" in note
    given, _ = apply_profile(ExperimentConfig(**SMALL, algorithm="clove", models=2, unsupervised=True, lr=0.05),
                             "paper", keep={"lr"}, keep_options={"first_assignment"})
    assert given.lr == 0.05 and given.options.get("first_assignment") is None  # what the user gave wins


# -- compare --profile: one protocol to rank by ---------------------------------------------------------------------
def _summary(name, final, reported, protocol):
    return {"algorithm": name, "final_accuracy": final, "best_accuracy": max(final, reported),
            "reported_accuracy": reported, "protocol": protocol, "total_bytes": 1e6, "total_seconds": 1.0,
            "status": "finished"}


def test_a_comparison_across_protocols_ranks_by_the_common_one_beside_each_own():
    results = {"flexcfl": _summary("flexcfl", 0.50, 0.90, "flexcfl"), "clove": _summary("clove", 0.70, 0.70, "clove"),
               "ifca": _summary("ifca", 0.60, 0.65, "ifca")}
    markdown, csv_text = compare_table(results)
    lines = markdown.splitlines()
    header = lines[2]
    assert "final accuracy (protocol clove, every run: ranked by it)" in header
    assert "reported accuracy (own protocol)" in header
    assert [line.split(" | ")[0].strip("| ") for line in lines[4:]] == ["clove", "ifca", "flexcfl"]
    assert "not comparable across rows" in lines[0]
    same, _ = compare_table({"a": _summary("a", 0.5, 0.5, "clove"), "b": _summary("b", 0.7, 0.7, "clove")})
    assert "| reported accuracy |" in same and [line.split(" | ")[0].strip("| ")
                                                for line in same.splitlines()[4:]] == ["a", "b"]


# -- the training path and the thread count ---------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm, optimizer, path", [
    ("fedavg", "sgd", None),  # the kernel where it is built here, else PyTorch with the build's reason
    ("fedavg", "adam", "PyTorch"),
    ("fedprox", "sgd", "PyTorch"),
])
def test_every_run_records_its_training_path_and_thread_count(tmp_path, algorithm, optimizer, path):
    from cfl_core.engine import native

    config = ExperimentConfig(**SMALL, algorithm=algorithm, rounds=2, optimizer=optimizer)
    Experiment(config, out_dir=tmp_path / "run").run()
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    expected = path or ("compiled kernel" if native.library() is not None else "PyTorch")
    for facts in (meta, summary):
        assert facts["training_path"] == expected and facts["threads"] == torch.get_num_threads()
        assert facts["training_path_reason"]
    if optimizer == "adam":
        assert "optimizer adam" in meta["training_path_reason"]
    if algorithm == "fedprox" and native.library() is not None:
        assert "needs PyTorch" in meta["training_path_reason"]


def test_a_sweeps_results_csv_has_the_training_path_and_threads(tmp_path):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"base": {**SMALL, "algorithm": "fedavg", "rounds": 1},
                                "grid": {"optimizer": ["sgd", "adam"]}}))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--executor", "serial"]) == 0
    import csv

    rows = list(csv.DictReader((tmp_path / "out" / "results.csv").open()))
    assert [r["optimizer"] for r in rows] == ["sgd", "adam"]
    assert rows[1]["training_path"] == "PyTorch" and all(r["threads"] == "1" for r in rows)
