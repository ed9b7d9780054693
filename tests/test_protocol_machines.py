"""IFCA's held-out test machines and cluster accuracy, FlexCFL's model-last-received accuracy, profiles in sweeps."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch

from cfl_core.config import ExperimentConfig
from cfl_core.data import load_dataset
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment
from cfl_core.partition import transforms
from cfl_core import protocols
from cfl_core.protocols import (CLUSTER_ACCURACY_KEY, INDEX_ACCURACY_KEY, LAST_RECEIVED_KEY, PICKS_KEY,
                                TEST_MACHINE_KEY, matched_share, reported_accuracy)
from cfl_core.held_out_machines import build_test_machines, machine_test_indices

SMALL = dict(dataset="digits", partition="feature-skew", clusters=2, clients_per_cluster=3, samples_per_client=30,
             device="cpu")
IFCA = dict(SMALL, algorithm="ifca", models=2, protocol="ifca", test_machines_per_cluster=4)


def _run(**fields):
    exp = Experiment(ExperimentConfig(**fields))
    records = list(exp)
    return exp, records, exp.close()


# -- IFCA: test machines ---------------------------------------------------------------------------------

def test_test_machines_are_held_out_clients_with_their_clusters_transform():
    cfg = ExperimentConfig(**IFCA, rounds=1)
    dataset = load_dataset("digits")
    machines = build_test_machines(cfg, dataset, torch.device("cpu"))
    rows = machine_test_indices(cfg, dataset)
    assert machines.num_clients == 8 and machines.clusters.tolist() == [0] * 4 + [1] * 4
    assert machines.n_train.tolist() == [0] * 8  # they never hold training data
    assert machines.n_test.tolist() == [cfg.partition_config().test_size] * 8
    # disjoint test images (the pool has enough), each machine rotated as its cluster's clients are (0, 180)
    everything = np.concatenate(rows)
    assert len(np.unique(everything)) == len(everything)
    for i, idx in enumerate(rows):
        expected, labels = transforms.apply({"rotation": 180 * (i // 4)}, dataset.x_test[torch.from_numpy(idx)],
                                            dataset.y_test[torch.from_numpy(idx)], {}, 0, 0, 1)
        n = len(idx)
        assert torch.equal(machines.x_test[i, :n], expected) and torch.equal(machines.y_test[i, :n], labels)
    # the machines are not clients: the run trains exactly as without them, the records differ by the extras only
    exp, with_machines, _ = _run(**IFCA, rounds=2)
    _, without, _ = _run(**{**IFCA, "protocol": "clove"}, rounds=2)
    assert exp.federation.num_clients == 6 and exp.test_machines.fed.num_clients == 8
    for a, b in zip(with_machines, without):
        assert (a.assignments, a.accuracy, a.loss_matrix, a.client_loss) == \
               (b.assignments, b.accuracy, b.loss_matrix, b.client_loss)
        assert TEST_MACHINE_KEY in a.extras and TEST_MACHINE_KEY not in b.extras


def test_test_machine_accuracy_is_correct_over_samples_of_each_machines_lowest_loss_model():
    exp, records, summary = _run(**IFCA, rounds=2)
    models = exp.algorithm.eval_models()[0]
    engine = exp.test_machines
    machines = torch.arange(engine.fed.num_clients)
    per_model = [engine.evaluate(models, torch.full((8,), k, dtype=torch.int64), machines) for k in range(2)]
    pick = torch.where(per_model[0].loss <= per_model[1].loss, 0, 1)
    acc = torch.where(pick == 0, per_model[0].accuracy, per_model[1].accuracy)
    n = engine.fed.n_test.float()
    last = records[-1].extras
    assert last[TEST_MACHINE_KEY] == pytest.approx(float((acc * n).sum() / n.sum()), abs=1e-6)
    assert last[PICKS_KEY] == torch.bincount(pick, minlength=2).tolist()
    # the summary reports the test machines' figure and the cluster accuracy under protocol ifca
    assert summary["protocol"] == "ifca"
    assert summary["reported_accuracy"] == pytest.approx(last[TEST_MACHINE_KEY], abs=1e-6)
    assert summary["reported_cluster_accuracy"] == pytest.approx(last[CLUSTER_ACCURACY_KEY], abs=1e-6)
    assert summary["reported_cluster_accuracy_index"] == pytest.approx(last[INDEX_ACCURACY_KEY], abs=1e-6)


def test_cluster_accuracy_matches_models_to_clusters_and_keeps_the_codes_index_match():
    # models 1, 0, 2 serve clusters 0, 1, 2: every machine is on its cluster's model, but only cluster 2 by index
    assert matched_share([1, 1, 0, 0, 2, 2], [0, 0, 1, 1, 2, 2], 3) == (1.0, pytest.approx(1 / 3))
    # one machine of cluster 0 on cluster 1's model; a spare model 3 nobody uses
    assert matched_share([0, 0, 1, 1, 1], [0, 0, 0, 1, 1], 4) == (pytest.approx(0.8), pytest.approx(0.8))
    assert matched_share([2, 2, 2, 2], [0, 0, 1, 1], 3) == (0.5, 0.0)  # one model for two clusters


def test_collapsed_ifca_puts_every_machine_on_model_0_and_model_order_moves_only_the_index_match():
    # identical initial models: every client ties and trains model 0, the untrained copy loses everywhere
    exp, records, _ = _run(**IFCA, init="same", rounds=2)
    last = records[-1].extras
    assert last[PICKS_KEY] == [8, 0]
    assert last[CLUSTER_ACCURACY_KEY] == 0.5 and last[INDEX_ACCURACY_KEY] == 0.5  # cluster 0's machines only
    models = exp.algorithm.eval_models()[0]
    engine = exp.test_machines
    machines = torch.arange(8)
    truth = engine.fed.clusters.numpy()
    flipped = protocols.test_machine_stats(engine, models.flip(0), machines, truth)
    assert flipped[PICKS_KEY] == [0, 8]
    assert flipped[TEST_MACHINE_KEY] == pytest.approx(last[TEST_MACHINE_KEY], abs=1e-6)
    assert flipped[CLUSTER_ACCURACY_KEY] == 0.5 and flipped[INDEX_ACCURACY_KEY] == 0.5  # now cluster 1's


def test_test_machines_are_deterministic_and_follow_the_seed():
    a = ExperimentConfig(**IFCA, rounds=2)
    dataset = load_dataset("digits")
    first, again = machine_test_indices(a, dataset), machine_test_indices(a, dataset)
    assert all(np.array_equal(x, y) for x, y in zip(first, again))
    other = machine_test_indices(a.replace(seed=1), dataset)
    assert not all(np.array_equal(x, y) for x, y in zip(first, other))
    _, one, _ = _run(**IFCA, rounds=2)
    _, two, _ = _run(**IFCA, rounds=2)
    assert [r.extras for r in one] == [r.extras for r in two]


def test_test_machine_setting_is_checked_and_zero_uses_the_clients_own_splits():
    with pytest.raises(ConfigError, match="test_machines_per_cluster"):
        ExperimentConfig.from_dict({**IFCA, "test_machines_per_cluster": -1}).validate()
    with pytest.raises(ConfigError, match="test_machines_per_cluster=10000 is not allowed: at most 1,000,000"):
        ExperimentConfig.from_dict({**IFCA, "test_machines_per_cluster": 10_000,
                                    "test_samples_per_client": 60}).validate()  # 1.2 million test samples
    exp, records, _ = _run(**{**IFCA, "test_machines_per_cluster": 0}, rounds=1)
    assert exp.test_machines is None and sum(records[-1].extras[PICKS_KEY]) == 6  # the six clients' test splits
    default = ExperimentConfig(**{**IFCA, "test_machines_per_cluster": None}, rounds=1)
    assert build_test_machines(default, load_dataset("digits"), torch.device("cpu")).num_clients == 6


# -- FlexCFL: each client on the model it last received --------------------------------------------------

FLEX = dict(SMALL, clients_per_cluster=4, algorithm="fedgroup", models=2, protocol="flexcfl")


def test_flexcfl_protocol_scores_each_client_on_the_model_it_last_received():
    # full participation: a client is sent its group's model at the start of every round, i.e. the models
    # the previous round's record was scored on
    _, records, summary = _run(**FLEX, rounds=4)
    for before, r in zip(records, records[1:]):
        assert r.extras[LAST_RECEIVED_KEY] == pytest.approx(before.weighted_accuracy, abs=1e-6)
    values = [r.extras[LAST_RECEIVED_KEY] for r in records]
    assert summary["reported_accuracy"] == pytest.approx(max(values), abs=1e-6)
    assert reported_accuracy("flexcfl", records)[1] == int(np.argmax(values))
    # partial participation: a client not selected keeps the older model it was sent
    exp = Experiment(ExperimentConfig(**FLEX, rounds=5, participation=0.5))
    sent = {}
    models = exp.algorithm.models.clone()
    for _ in range(5):
        record = exp.step()
        for c in record.participants:
            sent[c] = models[exp.algorithm.assign[c]].clone()
        models = exp.algorithm.models.clone()
    algo = exp.algorithm
    assert set(torch.nonzero(algo.has_received).squeeze(1).tolist()) == set(sent)
    for c, model in sent.items():
        assert torch.equal(algo.received[c], model)
    ids = torch.tensor(sorted(sent))
    ev = exp.engine.evaluate(torch.stack([sent[c] for c in sorted(sent)]), torch.arange(len(ids)), ids)
    n = exp.federation.n_test[ids].float()
    assert record.extras[LAST_RECEIVED_KEY] == pytest.approx(float((ev.accuracy * n).sum() / n.sum()), abs=1e-6)


def test_last_received_models_are_kept_only_under_the_flexcfl_protocol_and_survive_a_resume(tmp_path):
    plain, records, _ = _run(**{**FLEX, "protocol": "clove"}, rounds=1)
    assert plain.algorithm.received is None and LAST_RECEIVED_KEY not in records[0].extras
    _, whole, _ = _run(**FLEX, rounds=3, participation=0.5)
    exp = Experiment(ExperimentConfig(**FLEX, rounds=3, participation=0.5), out_dir=tmp_path / "run")
    exp.step()
    exp.step()
    exp.close()
    resumed = Experiment.resume(tmp_path / "run")
    resumed.run()
    assert [r.extras.get(LAST_RECEIVED_KEY) for r in resumed.records] == \
           [pytest.approx(r.extras.get(LAST_RECEIVED_KEY), abs=1e-6) for r in whole]


# -- profiles in sweep specs ---------------------------------------------------------------------------------

def test_a_sweep_takes_a_profile_in_base_or_as_an_axis_under_the_fields_it_gives():
    from cfl_core.profiles import apply_profile
    from cfl_core.sweep import SweepSpec

    base = {"dataset": "digits", "partition": "feature-skew", "algorithm": "ifca", "models": 4, "rounds": 3}
    spec = SweepSpec.from_dict({"base": {**base, "profile": "paper"}, "grid": {"seed": [0, 1]}})
    for point in spec.expand().points:
        expected, _ = apply_profile(ExperimentConfig(**{**base, "seed": point.config.seed}), "paper",
                                    keep=set(base) | {"seed"})
        assert point.config == expected and point.config.rounds == 3  # the spec's rounds win over the profile's
        assert point.config.momentum == 0.0 and point.config.options == {"weighting": "uniform"}
    axis = SweepSpec.from_dict({"base": {**base, "options": {"weighting": "samples"}},
                                "grid": {"profile": [None, "paper", "authors-code"]}}).expand().points
    assert [p.values["profile"] for p in axis] == [None, "paper", "authors-code"]
    assert [p.config.protocol for p in axis] == ["clove", "ifca", "ifca"]
    assert all(p.config.options["weighting"] == "samples" for p in axis)  # a given option wins too
    assert axis[2].config.options["restart_rule"] == "authors"
    cases = SweepSpec.from_dict({"base": base, "cases": [{"algorithm": "cfl", "profile": "authors-code"}]})
    assert cases.expand().points[0].config.options["optimizer_state"] == "persistent"


@pytest.mark.parametrize("spec, where", [
    ({"base": {"profile": "papers"}, "grid": {"seed": [0]}}, "base.profile='papers'"),
    ({"grid": {"profile": ["paper", "Paper"]}}, "grid.profile[1]='Paper'"),
    ({"zip": [{"profile": ["paper", 1], "seed": [0, 1]}]}, "zip[0].profile[1]=1"),
    ({"cases": [{"profile": ["paper"]}]}, "cases[0].profile=['paper']"),
])
def test_a_bad_profile_in_a_sweep_spec_is_one_error_naming_it(spec, where):
    from cfl_core.sweep import SweepSpec

    with pytest.raises(ConfigError) as err:
        SweepSpec.from_dict(spec)
    assert str(err.value) == f"{where} is not allowed: a profile: one of paper, authors-code"


def test_a_profiled_ifca_sweep_reports_the_test_machines_and_its_tables_say_so(tmp_path):
    from cfl_core.sweep import SweepSpec, run_sweep

    spec = SweepSpec.from_dict({"name": "profiled", "base": {**SMALL, "algorithm": "ifca", "models": 2, "rounds": 1,
                                                             "profile": "paper"}, "grid": {"seed": [0]}})
    run_sweep(spec, tmp_path / "sw", executor="serial")
    rows = list(csv.DictReader((tmp_path / "sw" / "results.csv").open()))
    assert [r["protocol"] for r in rows] == ["ifca"] and rows[0]["reported_accuracy"]
    summary_md = (tmp_path / "sw" / "summary.md").read_text()
    assert "Accuracy protocol: `ifca`" in summary_md and "held-out test machines" in summary_md
    run = next((tmp_path / "sw").rglob("summary.json"))
    assert json.loads(run.read_text())["reported_cluster_accuracy"] is not None
