"""Distribution shifts: data conservation, true clusters following the data, incremental growth, validation,
every algorithm working under each shift and with newcomers, determinism."""
from __future__ import annotations

import pytest
import torch

from cfl_core.algorithms import ALGORITHMS
from cfl_core.config import ExperimentConfig
from cfl_core.dynamics import SHIFTS
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment, Setup


BASE = dict(dataset="digits", partition="label-skew-1", clusters=4, clients_per_cluster=5, samples_per_client=40,
            device="cpu", algorithm="fedavg", rounds=8)


def shifted(shift, options, **changes):
    """(setup, shift object) without running any algorithm."""
    cfg = ExperimentConfig(**{**BASE, **changes}, shift=shift, shift_options=options)
    cfg.validate()
    setup = Setup.build(cfg)
    from cfl_core.experiment import _copy_federation

    fed = _copy_federation(setup.federation)
    truth = fed.clusters.clone()
    return setup, fed, truth, SHIFTS[shift](cfg, fed, truth)


def samples(fed, split):
    """Every valid (client, image bytes, label) of a split as a multiset keyed by the sample."""
    x, y, n = getattr(fed, f"x_{split}"), getattr(fed, f"y_{split}"), getattr(fed, f"n_{split}")
    out = {}
    for c in range(fed.num_clients):
        for i in range(int(n[c])):
            key = (x[c, i].numpy().tobytes(), int(y[c, i]))
            out.setdefault(key, []).append(c)
    return out


def test_shifts_are_registered_and_validated():
    assert {"swap-all", "swap-part", "incremental"} <= set(SHIFTS)
    bad = [
        ("swap-all", {"probability": 1.5}, "shift_options.probability"),
        ("swap-all", {"pairs": 0}, "shift_options.pairs"),
        ("swap-part", {"start_round": 8}, "shift_options.start_round"),
        ("swap-part", {"colour": 1}, "shift_options.colour"),
        ("swap-all", {"probability": "often"}, "shift_options.probability"),
        ("incremental", {"stages": "0.5,0.4,1.0"}, "shift_options.stages"),
        ("incremental", {"stages": "0.5,0.75"}, "shift_options.stages"),  # must end with all the data
        ("incremental", {"stages": "0.5,1.0", "stage_rounds": "0,9"}, "shift_options.stage_rounds"),
        ("incremental", {"stages": "0.5,1.0", "stage_rounds": "0"}, "shift_options.stage_rounds"),
    ]
    for shift, options, field in bad:
        with pytest.raises(ConfigError, match=field):
            ExperimentConfig(**BASE, shift=shift, shift_options=options).validate()
    with pytest.raises(ConfigError, match="shift"):
        ExperimentConfig(**BASE, shift="rotate").validate()
    with pytest.raises(ConfigError, match="swap-part"):
        ExperimentConfig(**{**BASE, "dataset": "synthetic-linear", "partition": "linear-mixture"},
                         shift="swap-part").validate()
    # lists from JSON configs are accepted as well as "a,b" strings
    ExperimentConfig(**BASE, shift="incremental", shift_options={"stages": [0.5, 1.0], "stage_rounds": [0, 4]}).validate()


def test_swap_all_conserves_data_and_truth_follows_it():
    setup, fed, truth, shift = shifted("swap-all", {"probability": 1.0, "pairs": 3, "across_clusters": True})
    shared = (setup.federation.x_train.clone(), setup.federation.n_train.clone(), setup.federation.clusters.clone())
    before = {split: samples(fed, split) for split in ("train", "test")}
    owner_cluster = {key: int(truth[c[0]]) for key, c in before["train"].items()}
    events = []
    for r in range(1, 6):
        events += shift.apply(r).get("shift_events", [])
    assert events and all(e["kind"] == "swap-all" for e in events)
    for split in ("train", "test"):
        after = samples(fed, split)
        assert {k: len(v) for k, v in after.items()} == {k: len(v) for k, v in before[split].items()}  # global data
    for c in range(fed.num_clients):  # every client holds one original client's data: its truth is that cluster
        clusters = {owner_cluster[(fed.x_train[c, i].numpy().tobytes(), int(fed.y_train[c, i]))]
                    for i in range(int(fed.n_train[c]))}
        assert clusters == {int(truth[c])}
    assert not torch.equal(truth, setup.federation.clusters)  # someone moved
    assert all(torch.equal(a, b) for a, b in zip(shared, (setup.federation.x_train, setup.federation.n_train,
                                                           setup.federation.clusters)))  # the shared setup untouched
    assert shift.apply(0) == {}  # start_round 1


def test_swap_part_moves_one_label_each_and_conserves_data():
    setup, fed, truth, shift = shifted("swap-part", {"probability": 1.0, "pairs": 1})
    before = {split: samples(fed, split) for split in ("train", "test")}
    counts_before = fed.label_counts()
    event = shift.apply(1)["shift_events"][0]
    a, b = event["clients"]
    la, lb = event["labels"]
    counts = fed.label_counts()
    assert counts[a, la] == 0 and counts[b, lb] == (0 if la != lb else counts[b, lb])
    assert counts[a, lb] == counts_before[a, lb] + counts_before[b, lb]
    assert counts[b, la] == counts_before[b, la] + counts_before[a, la]
    assert event["moved_train"] == [int(counts_before[a, la]), int(counts_before[b, lb])]
    others = [c for c in range(fed.num_clients) if c not in (a, b)]
    assert torch.equal(counts[others], counts_before[others])
    assert int(fed.n_train.sum()) == sum(len(v) for v in before["train"].values())
    for split in ("train", "test"):
        after = samples(fed, split)
        assert {k: len(v) for k, v in after.items()} == {k: len(v) for k, v in before[split].items()}
    # test samples of the labels moved too: the client is tested on what it now holds
    test_labels_a = set(fed.y_test[a, : int(fed.n_test[a])].tolist())
    assert la not in test_labels_a


def test_swap_part_repads_when_a_client_outgrows_the_tensors():
    setup, fed, truth, shift = shifted("swap-part", {"probability": 1.0, "pairs": 10}, within="dirichlet", alpha=0.2)
    n_max = fed.x_train.shape[1]
    total = int(fed.n_train.sum())
    for r in range(1, 8):
        shift.apply(r)
    assert int(fed.n_train.sum()) == total
    assert fed.x_train.shape[1] >= int(fed.n_train.max()) and fed.x_train.shape[1] >= n_max
    assert shift.origin["train"].shape == fed.y_train.shape
    # the majority rule: each client's truth is where most of its training samples came from
    for c in range(fed.num_clients):
        origin = shift.origin["train"][c, : int(fed.n_train[c])]
        counts = torch.bincount(origin, minlength=4)
        assert counts[int(truth[c])] == counts.max()


def test_incremental_grows_the_data_in_stages():
    setup, fed, truth, shift = shifted("incremental", {"stages": "0.25,0.5,1.0", "stage_rounds": "0,2,5"})
    full = setup.federation.n_train.clone()
    assert torch.equal(fed.n_train, torch.ceil(full * 0.25).long())  # released before any training
    full_samples = samples(setup.federation, "train")
    seen = []
    for r in range(8):
        extras = shift.apply(r)
        seen.append(int(fed.n_train.sum()))
        if r in (2, 5):
            assert extras["shift_events"][0]["fraction"] == {2: 0.5, 5: 1.0}[r]
        else:
            assert extras == {}
        visible = samples(fed, "train")
        assert all(key in full_samples for key in visible)  # a subset of the client's own data
    assert seen == sorted(seen) and seen[0] < seen[2] < seen[5] == int(full.sum())  # it only grows
    assert samples(fed, "train") == full_samples  # at the end: exactly the original data
    assert torch.equal(fed.n_test, setup.federation.n_test) and torch.equal(truth, setup.federation.clusters)


def test_incremental_default_stages_are_spread_over_the_run():
    setup, fed, truth, shift = shifted("incremental", {}, rounds=9)
    assert shift.stage_rounds == [0, 3, 6] and shift.fractions == [0.5, 0.75, 1.0]


@pytest.mark.parametrize("shift,options", [("swap-all", {"probability": 1.0}),
                                           ("swap-part", {"probability": 1.0, "pairs": 3}),
                                           ("incremental", {})])
def test_every_algorithm_runs_under_the_shift_with_newcomers(shift, options):
    for name, cls in ALGORITHMS.items():
        cfg = ExperimentConfig(**{**BASE, "rounds": 3, "algorithm": name}, models=4 if cls.needs_models else None,
                               shift=shift, shift_options=options, newcomer_share=0.2, newcomer_round=2,
                               participation=0.8, seed=1)
        exp = Experiment(cfg)
        records = list(exp)
        assert len(records) == 3, name
        took_part = {c for r in records for c in r.participants}
        if cls.has_clusters or not cls.one_model_per_client:
            assert all(a >= 0 for a in records[-1].assignments), name  # everyone placed, newcomers included
        else:  # a personalised model counts once its client has trained it (FedProto, FedALA, FedPAC)
            assert all((a >= 0) == (c in took_part) for c, a in enumerate(records[-1].assignments)), name
        assert records[2].extras["newcomers"], name
        assert records[-1].accuracy is not None, name
        # an ARI for every algorithm with clusters; null (with the flag) for those without
        assert (records[-1].ari is not None) == cls.has_clusters, name
        assert cls.has_clusters or records[-1].extras["ari_applicable"] is False, name
        assert records[-1].true_clusters == exp.true_clusters.tolist()
        if shift != "incremental":
            assert any(r.extras.get("shift_events") for r in records), name


def test_oracle_follows_the_true_clusters_under_swap_all():
    records = list(Experiment(ExperimentConfig(**{**BASE, "rounds": 5, "algorithm": "oracle"}, shift="swap-all",
                                               shift_options={"probability": 1.0, "pairs": 2,
                                                              "across_clusters": True})))
    assert records[0].true_clusters != records[-1].true_clusters
    assert all(r.ari == pytest.approx(1.0) for r in records)


def test_same_seed_same_shifts():
    def once():
        cfg = ExperimentConfig(**{**BASE, "rounds": 5}, shift="swap-part", shift_options={"probability": 0.7, "pairs": 2})
        return [(r.extras.get("shift_events"), r.true_clusters, r.client_accuracy) for r in Experiment(cfg)]

    assert once() == once()


def test_a_shifted_run_never_touches_a_shared_setup():
    cfg = ExperimentConfig(**{**BASE, "rounds": 3}, shift="swap-part", shift_options={"probability": 1.0, "pairs": 5})
    setup = Setup.build(cfg)
    fed = setup.federation
    before = [t.clone() for t in (fed.x_train, fed.y_train, fed.n_train, fed.x_test, fed.clusters)]
    exp = Experiment(cfg, setup=setup)
    list(exp)
    assert exp.federation is not fed and not torch.equal(exp.federation.n_train, fed.n_train)
    assert all(torch.equal(a, b) for a, b in zip(before, (fed.x_train, fed.y_train, fed.n_train, fed.x_test,
                                                          fed.clusters)))
