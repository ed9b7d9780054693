"""The authors'-code variants (docs/faithfulness.md): each option changes what it should, and nothing else."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cfl_core.algorithms.base import restart_threshold
from cfl_core.algorithms.clove import choose_k, choose_k_authors, cover_every_model
from cfl_core.bench.reference import SequentialEngine
from cfl_core.config import ExperimentConfig
from cfl_core.engine.core import Engine
from cfl_core.engine.models import build_model
from cfl_core.engine.training import OptimizerMemory, TrainConfig
from cfl_core.experiment import Experiment
from tests.helpers import random_federation

SMALL = dict(dataset="digits", partition="feature-skew", clusters=2, clients_per_cluster=3, samples_per_client=30,
             device="cpu")


def _records(**fields):
    exp = Experiment(ExperimentConfig(**{**SMALL, **fields}))
    out = [r for r in exp]
    models = exp.algorithm.eval_models()[0].clone()
    exp.close()
    return out, models


# -- weighting=samples|uniform ---------------------------------------------------------------------

def test_uniform_weights_are_ones_and_sample_weights_are_counts():
    fed = random_federation(4, (1, 8, 8), 10)
    spec = build_model("mlp", (1, 8, 8), 10, "classification")
    engine = Engine(spec, fed, TrainConfig(), seed=0)
    ids = torch.arange(4)
    assert torch.equal(engine.weights(ids, "uniform"), torch.ones(4))
    assert torch.equal(engine.weights(ids), fed.n_train[ids].float())


@pytest.mark.parametrize("algorithm,models", [("ifca", 2), ("clove", 2), ("fedavg", None), ("cfl", None),
                                              ("fesem", 2), ("flexcfl", 2), ("oracle", None)])
def test_weighting_differs_only_under_quantity_skew(algorithm, models):
    base = dict(algorithm=algorithm, models=models, rounds=2)
    _, equal_samples = _records(**base)
    _, equal_uniform = _records(**base, options={"weighting": "uniform"})
    assert torch.allclose(equal_samples, equal_uniform, atol=1e-6)  # equal client sizes: the same means
    _, skew_samples = _records(**base, quantity_skew=2.0)
    _, skew_uniform = _records(**base, quantity_skew=2.0, options={"weighting": "uniform"})
    assert not torch.allclose(skew_samples, skew_uniform, atol=1e-4)


# -- optimizer_state=reset|persistent, lr_decay (CFL) -----------------------------------------------

def _engine_pair(optimizer):
    fed = random_federation(3, (1, 8, 8), 10, seed=1)
    spec = build_model("mlp", (1, 8, 8), 10, "classification")
    cfg = TrainConfig(local_epochs=1, batch_size=8, lr=0.05 if optimizer == "sgd" else 0.01, optimizer=optimizer)
    return fed, spec, cfg


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_persistent_state_carries_momentum_and_matches_torch_optim(optimizer):
    fed, spec, cfg = _engine_pair(optimizer)
    tol = 1e-5 if optimizer == "sgd" else 5e-4  # Adam magnifies float rounding (as in test_engine.py)
    ids = torch.arange(3)
    start = torch.stack([spec.init(0, "model", 0)] * 3)
    batched, reference = Engine(spec, fed, cfg, seed=0), SequentialEngine(spec, fed, cfg, 0)
    mem_b = OptimizerMemory.zeros(3, spec.dim, optimizer, "cpu")
    mem_r = OptimizerMemory.zeros(3, spec.dim, optimizer, "cpu")
    first_b, _ = batched.train_without_exchange(start, ids, 0, memory=mem_b)
    first_r, _ = reference.train_without_exchange(start, ids, 0, memory=mem_r)
    fresh_first, _ = batched.train_without_exchange(start, ids, 0)
    assert torch.allclose(first_b, fresh_first, atol=1e-6)  # the first training starts from a zero state
    assert float(mem_b.first.abs().sum()) > 0  # ... and leaves a state behind
    assert torch.allclose(mem_b.first, mem_r.first, atol=tol)
    second_b, _ = batched.train_without_exchange(first_b, ids, 1, memory=mem_b)
    second_r, _ = reference.train_without_exchange(first_b, ids, 1, memory=mem_r)
    fresh_second, _ = batched.train_without_exchange(first_b, ids, 1)
    assert torch.allclose(second_b, second_r, atol=tol)  # torch.optim with the state loaded agrees
    assert not torch.allclose(second_b, fresh_second, atol=10 * tol)  # the carried state changed the training
    if optimizer == "adam":
        assert torch.equal(mem_b.steps, mem_r.steps)


def test_cfl_persistent_state_changes_rounds_after_the_first_only():
    base = dict(partition="concept-shift", algorithm="cfl", rounds=3)
    reset, _ = _records(**base)
    kept, _ = _records(**base, options={"optimizer_state": "persistent"})
    assert reset[0].client_loss == kept[0].client_loss
    assert reset[1].client_loss != kept[1].client_loss
    assert reset[1].extras["update_norms"] != kept[1].extras["update_norms"]


def test_cfl_lr_decay_trains_round_t_with_lr_times_decay_to_t_plus_1():
    decayed, _ = _records(partition="concept-shift", algorithm="cfl", rounds=1, lr=0.1,
                          options={"lr_decay": 0.5})
    plain, _ = _records(partition="concept-shift", algorithm="cfl", rounds=1, lr=0.05)
    assert decayed[0].extras["update_norms"] == plain[0].extras["update_norms"]


# -- CLoVE: k_rule, stable_after, the random start's cover, matching on the embedding --------------

def _blobs(centres, per, sd, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([np.asarray(c, float) + sd * rng.standard_normal((per, len(c))) for c in centres])


def test_authors_k_rule_keeps_the_smaller_k_unless_a_larger_scores_over_1_10_times_the_best():
    rng = np.random.default_rng(4)
    # 20 IID clients that differ only in difficulty: every loss shifted by a per-client offset
    iid = 2.0 + rng.uniform(0, 1, 20)[:, None] + 0.02 * rng.standard_normal((20, 4))
    k, scores = choose_k_authors(iid, 4)
    assert sorted(scores) == [2, 3, 4]
    assert scores[3] > scores[2] and scores[3] <= 1.10 * scores[2]  # better, but not by the margin
    assert k == 2  # K = 1 is never chosen by the authors' rule ...
    assert choose_k(iid, 4, 0, 0.5, 0.01)[0] == 1  # ... while CFL Lab's centred rule keeps one cluster
    three = _blobs([[0, 2, 2], [2, 0, 2], [2, 2, 0]], 5, 0.1)
    k, scores = choose_k_authors(three, 4)
    assert k == 3 and scores[3] > 1.10 * scores[2]  # a clearly better K replaces the best
    pairs = _blobs([[0, 0, 3, 3], [0.6, 0.6, 3, 3], [3, 3, 0, 0], [3.6, 3.6, 0, 0]], 5, 0.15)
    assert choose_k_authors(pairs, 4)[0] == 2  # two pairs of close clusters: the coarse split
    few = _blobs([[0, 2], [2, 0]], 2, 0.1)  # K-hat >= clients: the vectors are repeated 5 times, K = P possible
    k, scores = choose_k_authors(few, 4)
    assert sorted(scores) == [2, 3, 4] and k == 2


def test_k_rule_authors_runs_and_records_its_scores():
    records, _ = _records(partition="concept-shift", algorithm="clove", models=3, rounds=2,
                          options={"unknown_k": True, "k_rule": "authors"})
    info = records[1].extras
    assert info["k"] >= 2 and set(info["silhouette"]) <= {"2", "3"}


@pytest.mark.parametrize("stable_after,frozen_round", [(None, 4), (4, 4), (3, 3), (2, 2)])
def test_stable_after_counts_identical_consecutive_assignments(stable_after, frozen_round):
    options = {"first_assignment": "evaluation"}
    if stable_after is not None:
        options["stable_after"] = stable_after
    # label-skew-1 with K = 2: the first clustering round is already right and never changes
    records, _ = _records(partition="label-skew-1", algorithm="clove", models=2, rounds=6, options=options)
    assert all(r.assignments == records[1].assignments for r in records[1:])
    frozen = [r.round for r in records if "frozen_after" in r.extras]
    # assignments of rounds 0, 1, ... are identical: n identical assignments end at round n - 1
    assert frozen == [frozen_round - 1]
    assert records[frozen_round].phase == "stable" and records[frozen_round - 1].phase == "clustering"


def test_random_start_gives_every_model_a_client():
    gen = np.random.default_rng(2)
    for trial in range(200):
        k = int(gen.integers(2, 6))
        n = int(gen.integers(k, k + 4))
        draw = torch.as_tensor(gen.integers(0, k, n))
        before = draw.clone()
        moved = cover_every_model(draw, k, gen)
        assert torch.bincount(draw, minlength=k).min() >= 1
        assert torch.equal(draw != before, torch.isin(torch.arange(n), torch.tensor(moved, dtype=torch.long)))
    short = torch.tensor([0, 0])
    assert cover_every_model(short, 3, gen) == [] and short.tolist() == [0, 0]  # fewer clients than models


def test_matching_cost_uses_the_clustered_embedding_under_sqrt_losses():
    from types import SimpleNamespace

    from cfl_core.algorithms.clove import Clove

    # clients 0, 1 form one cluster, client 2 the other. Straight matching (cluster of 0, 1 -> model 0) costs
    # 2*0 + 3 = 3 on raw losses against 2*1 + 0 = 2 swapped; on square roots 0 + 1.73 against 2 + 0
    losses = torch.tensor([[0.0, 1.0], [0.0, 1.0], [0.0, 3.0]])
    chosen = {}
    for match_on in ("embedding", "raw"):
        clove = Clove.__new__(Clove)
        clove.opts = Clove.Options(sqrt_losses=True, match_on=match_on)
        clove.cfg, clove.models = SimpleNamespace(seed=0), torch.zeros(2, 1)
        chosen[match_on] = clove._cluster(losses, 1)[0].tolist()
    assert chosen["embedding"] == [0, 0, 1]
    assert chosen["raw"] == [1, 1, 0]


def test_ifca_authors_restart_rule_meets_its_threshold():
    for models, threshold in ((2, 0.35), (4, 0.10)):
        records, _ = _records(partition="feature-skew", clusters=models, clients_per_cluster=5, algorithm="ifca",
                              models=models, init="restarts", rounds=1, options={"restart_rule": "authors"})
        share = records[0].extras["init_min_share"]
        assert records[0].extras["init_attempts"] < 50 and share >= threshold
    assert restart_threshold("authors", 4) == (0.10, None) and restart_threshold("authors", 2) == (0.35, None)
    assert restart_threshold("authors", 3)[0] == pytest.approx(1 / 6) and restart_threshold("authors", 3)[1]
    assert restart_threshold("half-share", 4) == (0.125, None)


def test_flexcfl_cold_starts_a_client_when_first_selected():
    base = dict(partition="label-skew-1", clusters=2, clients_per_cluster=6, algorithm="flexcfl", models=2,
                rounds=3, options={"alpha": 1.0, "client_cold_start": "first-selected"})
    at_setup = {**base, "options": {"alpha": 1.0}}  # the default
    first, _ = _records(**base)
    setup, _ = _records(**at_setup)
    for a, b in zip(first, setup):  # full participation: the same records either way
        assert a.assignments == b.assignments and a.client_loss == b.client_loss and a.bytes_up == b.bytes_up
    partial, _ = _records(**base, participation=0.5)
    setup_partial, _ = _records(**at_setup, participation=0.5)
    assert all(a >= 0 for a in setup_partial[0].assignments)  # setup: everyone has a group at round 0
    group_cold_start = set(partial[0].extras["cold_start"]["clients"])
    seen: set[int] = set(group_cold_start)
    for r in partial:  # first-selected: a client has a group only once it was selected (or pre-trained)
        seen.update(r.participants)
        assert {c for c, a in enumerate(r.assignments) if a >= 0} == seen
    assert -1 in partial[0].assignments and partial[0].bytes_up < setup_partial[0].bytes_up


# -- reporting protocols -----------------------------------------------------------------------------

def _record(round_, participants, assignments, accuracy, weighted, extras=None):
    from cfl_core.records import RoundRecord

    return RoundRecord(round_, "training", participants, assignments, None, [], [], accuracy, weighted, None, None,
                       1, 0, 0, 0.0, extras=extras or {})


def test_protocols_report_each_papers_measure():
    from cfl_core.protocols import reported_accuracy

    records = [_record(0, [0, 1], [0, 0, -1, -1], 0.5, 0.9),  # clients 2, 3 not selected yet: a partial round
               _record(1, [2, 3], [0, 0, 0, 0], 0.6, 0.7),
               _record(2, [0, 2], [0, 0, 0, 0], 0.8, 0.75, {"test_machine_accuracy": 0.85}),
               _record(3, [1, 3], [0, 0, 0, 0], 0.7, 0.72, {"test_machine_accuracy": 0.81})]
    assert reported_accuracy("clove", records) == (0.7, 3)
    assert reported_accuracy("flexcfl", records) == (0.75, 2)  # the max, without the partial round 0's 0.9
    assert reported_accuracy("ifca", records) == (0.81, 3)
    assert reported_accuracy("ifca", records[:2]) == (None, None)  # not recorded: the run had another protocol


def test_ifca_protocol_on_the_clients_own_splits_picks_each_lowest_loss_model_and_tables_name_it(tmp_path):
    from cfl_core.compare import compare_table, run_comparison

    # test_machines_per_cluster=0: every client's own test split is a test machine
    base = ExperimentConfig(**SMALL, rounds=2, protocol="ifca", models=2, test_machines_per_cluster=0)
    results = run_comparison(base, ["ifca", "fedavg"], tmp_path)
    exp = Experiment(base.replace(algorithm="ifca"))
    records = [r for r in exp]
    models = exp.algorithm.eval_models()[0]
    fed = exp.federation
    own = exp.engine.evaluate(models, torch.zeros(fed.num_clients, dtype=torch.int64))
    other = exp.engine.evaluate(models, torch.ones(fed.num_clients, dtype=torch.int64))
    pick = torch.where(own.loss <= other.loss, own.accuracy, other.accuracy)
    n = fed.n_test.float()
    assert records[-1].extras["test_machine_accuracy"] == pytest.approx(float((pick * n).sum() / n.sum()), abs=1e-6)
    assert results["ifca"]["protocol"] == "ifca"
    assert results["ifca"]["reported_accuracy"] == pytest.approx(records[-1].extras["test_machine_accuracy"], abs=1e-6)
    markdown, csv_text = compare_table(results)
    assert markdown.startswith("Reported accuracy: protocol `ifca`") and "reported_accuracy,protocol" in csv_text
    plain, _ = _records(algorithm="ifca", models=2, rounds=1)
    assert "test_machine_accuracy" not in plain[0].extras  # only when asked: the default records are unchanged


# -- profiles "as in the paper" / "as in the authors' code" -------------------------------------------

def test_profiles_set_each_papers_training_and_keep_the_clients_and_what_was_given():
    from cfl_core.compare import comparison_configs
    from cfl_core.profiles import FULL_BATCH, apply_profile

    base = ExperimentConfig(**SMALL, algorithm="ifca", models=2, lr=0.05)
    paper, note = apply_profile(base, "paper")
    assert (paper.momentum, paper.local_epochs, paper.batch_size, paper.optimizer) == (0.0, 10, FULL_BATCH, "sgd")
    assert paper.options["weighting"] == "uniform" and paper.protocol == "ifca" and "IFCA" in note
    assert paper.data_key() == base.data_key()  # a profile never changes which clients exist
    kept, _ = apply_profile(base, "paper", keep={"lr"}, keep_options={"weighting"})
    assert kept.lr == 0.05 and "weighting" not in kept.options
    same, note = apply_profile(base.replace(algorithm="fedavg"), "paper")
    assert same == base.replace(algorithm="fedavg") and note.startswith("no paper profile")
    cfl, _ = apply_profile(base.replace(algorithm="cfl", models=None), "authors-code")
    assert cfl.options["optimizer_state"] == "persistent" and cfl.options["lr_decay"] == 0.99
    assert cfl.options["gamma_check"] is False and cfl.options["bipartition"] == "complete"
    configs = comparison_configs(base, ["clove", "ifca", "fedavg"], profile=("paper", set(), set()))
    assert [c.optimizer for c in configs] == ["adam", "sgd", "sgd"]
    assert {c.rounds for c in configs} == {base.rounds}  # one round count for every algorithm compared
    for c in configs:
        c.validate()


def test_cli_profile_is_under_the_flags_given(tmp_path):
    from cfl_core.cli import main
    from cfl_core.run_reader import load_run

    assert main(["run", "--dataset", "digits", "--clusters", "2", "--clients-per-cluster", "2",
                 "--samples-per-client", "20", "--algorithm", "clove", "--models", "2", "--profile", "paper",
                 "--rounds", "2", "--lr", "0.02", "--option", "freeze=true", "--device", "cpu",
                 "--out", str(tmp_path / "r")]) == 0
    config = load_run(tmp_path / "r").config
    assert config["optimizer"] == "adam" and config["batch_size"] == 100 and config["lr"] == 0.02
    assert config["rounds"] == 2 and config["options"]["freeze"] is True
    assert config["options"]["first_assignment"] == "random"


def test_clove_without_freezing_keeps_clustering_and_cfl_without_gamma_check_splits():
    records, _ = _records(partition="label-skew-1", algorithm="clove", models=2, rounds=6,
                          options={"first_assignment": "evaluation", "freeze": False})
    assert all(r.phase == "clustering" for r in records)
    options = {"warmup_rounds": 1, "eps1": 50.0, "eps2": 0.0, "gamma_max": 0.99}
    refused, _ = _records(partition="concept-shift", algorithm="cfl", rounds=3, options=options)
    accepted, _ = _records(partition="concept-shift", algorithm="cfl", rounds=3,
                           options={**options, "gamma_check": False})
    events = [e for r in refused for e in r.extras.get("split_events", [])]
    assert events and not any(e["accepted"] for e in events)
    assert any(e["accepted"] for r in accepted for e in r.extras.get("split_events", []))


def test_compare_with_a_profile_gives_each_algorithm_its_own_training(tmp_path):
    import json

    from cfl_core.cli import main

    assert main(["compare", "--algorithms", "ifca,fedavg", "--dataset", "digits", "--clusters", "2",
                 "--clients-per-cluster", "2", "--samples-per-client", "20", "--rounds", "1", "--profile", "paper",
                 "--device", "cpu", "--out", str(tmp_path / "c")]) == 0
    ifca = json.loads((tmp_path / "c" / "ifca" / "config.json").read_text())
    fedavg = json.loads((tmp_path / "c" / "fedavg" / "config.json").read_text())
    assert ifca["momentum"] == 0.0 and ifca["protocol"] == "ifca" and ifca["options"]["weighting"] == "uniform"
    assert fedavg["momentum"] == 0.9 and fedavg["protocol"] == "clove"  # no profile for FedAvg: unchanged
    assert ifca["rounds"] == fedavg["rounds"] == 1
    table = (tmp_path / "c" / "compare.md").read_text()
    assert "protocol `clove`" in table and "protocol `ifca`" in table


def test_sweep_tables_name_their_protocol():
    from cfl_core.sweep.tables import protocol_note, protocols_in, summary_markdown

    assert protocols_in([{"protocol": "ifca"}, {"protocol": ""}]) == ["clove", "ifca"]
    text = summary_markdown("x", "", "cmd", "| a |\n|---|\n", [], {"points": 1}, ["flexcfl"])
    assert protocol_note(["flexcfl"]) in text and "FlexCFL" in text


def test_protocol_table_gives_a_row_per_algorithm_and_protocol(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "protocol_table.py"
    spec = importlib.util.spec_from_file_location("protocol_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for seed in (0, 1):
        exp = Experiment(ExperimentConfig(**SMALL, algorithm="ifca", models=2, rounds=2, seed=seed, protocol="ifca"),
                         out_dir=tmp_path / f"seed{seed}" / "ifca")
        exp.run()
    rows = module.protocol_rows(tmp_path)
    assert [r.split(" | ")[:2] for r in rows[2:]] == [["| ifca", "`clove`"], ["| ifca", "`flexcfl`"],
                                                      ["| ifca", "`ifca`"]]
    assert all(r.endswith("| 2 |") for r in rows[2:])
    # IFCA's cluster accuracy of the same runs, matched and by index, from their summaries' figures
    from cfl_core.run_reader import load_run
    from cfl_core.sweep.tables import mean_std

    finals = [load_run(tmp_path / f"seed{seed}" / "ifca").records[-1].extras for seed in (0, 1)]
    clusters = module.cluster_accuracy_rows(tmp_path)
    assert clusters[2] == (f"| ifca | {mean_std([f['test_machine_cluster_accuracy'] for f in finals], 100)} | "
                           f"{mean_std([f['test_machine_cluster_accuracy_index'] for f in finals], 100)} | 2 |")
