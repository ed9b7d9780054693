"""Sattler's CFL: the split maths on their own, then behaviour on digits (concept shift splits, iid does not)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from cfl_core.algorithms.cfl import (
    complete_linkage_bipartition, cosine_similarity_matrix, cross_similarity_max, gamma_bound, gamma_check,
    optimal_bipartition, split_clients,
)
from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment


BASE = dict(dataset="digits", clusters=4, clients_per_cluster=5, algorithm="cfl", device="cpu")


def run(**changes):
    return list(Experiment(ExperimentConfig(**{**BASE, **changes})))


def brute_force_min_cross(sim: np.ndarray) -> float:
    n = len(sim)
    best = np.inf
    for mask in itertools.product([0, 1], repeat=n - 1):
        side = np.array((0,) + mask, dtype=bool)  # element 0 fixed on side 0
        if side.all() or not side.any():
            continue
        best = min(best, cross_similarity_max(sim, np.flatnonzero(~side), np.flatnonzero(side)))
    return best


def test_optimal_bipartition_minimises_the_largest_cross_similarity():
    rng = np.random.default_rng(0)
    for trial in range(30):
        n = int(rng.integers(3, 9))
        vectors = rng.normal(size=(n, 5))
        sim = cosine_similarity_matrix(torch.as_tensor(vectors))
        p1, p2 = optimal_bipartition(sim)
        assert sorted(np.concatenate([p1, p2]).tolist()) == list(range(n))
        assert 0 in p1 and len(p1) and len(p2)
        assert cross_similarity_max(sim, p1, p2) == pytest.approx(brute_force_min_cross(sim))


def test_complete_linkage_is_not_always_optimal():
    # a chain a-b-c-d: the weakest link is c-d; complete linkage cuts b-c instead
    sim = np.array([[1.0, 0.9, 0.8, 0.65],
                    [0.9, 1.0, 0.9, 0.75],
                    [0.8, 0.9, 1.0, 0.85],
                    [0.65, 0.75, 0.85, 1.0]])
    p1, p2 = optimal_bipartition(sim)
    assert (p1.tolist(), p2.tolist()) == ([0, 1, 2], [3])
    assert cross_similarity_max(sim, p1, p2) == pytest.approx(0.85)
    c1, c2 = complete_linkage_bipartition(sim)
    assert cross_similarity_max(sim, c1, c2) == pytest.approx(0.9)


def test_split_returns_global_client_ids_on_a_second_split():
    # The cluster made by a first split holds clients 3, 7, 12 and 18 (not 0..3): the parts must name them.
    members = [3, 7, 12, 18]
    sim = np.array([[1.0, -0.2, 0.8, -0.1],
                    [-0.2, 1.0, 0.0, 0.9],
                    [0.8, 0.0, 1.0, -0.3],
                    [-0.1, 0.9, -0.3, 1.0]])
    part1, part2, alpha = split_clients(members, sim)
    assert (part1, part2) == ([3, 12], [7, 18])
    assert alpha == pytest.approx(0.0)


def test_gamma_check_is_the_papers_inequality():
    assert gamma_bound(-1.0) == pytest.approx(1.0)
    assert gamma_bound(1.0) == pytest.approx(0.0)
    assert gamma_bound(0.28) == pytest.approx(0.6)
    assert gamma_check(0.6, 0.19)  # sqrt(0.405) = 0.636 > 0.6
    assert not gamma_check(0.6, 0.3)  # sqrt(0.35) = 0.592 < 0.6
    assert not gamma_check(1.0, -1.0)  # gamma_max = 1 never accepts


def test_options_are_validated():
    with pytest.raises(ConfigError, match="options.eps1"):
        ExperimentConfig(**BASE, options={"eps1": 0}).validate()
    with pytest.raises(ConfigError, match="options.min_split_size"):
        ExperimentConfig(**BASE, options={"min_split_size": 2}).validate()
    with pytest.raises(ConfigError, match="options.bipartition"):
        ExperimentConfig(**BASE, options={"bipartition": "ward"}).validate()
    with pytest.raises(ConfigError, match="aggregation"):
        ExperimentConfig(**BASE, aggregation="gradient").validate()


def test_concept_shift_splits_recursively_until_the_clusters_are_found():
    records = run(partition="concept-shift", rounds=16, seed=0)
    final = records[-1]
    assert final.ari >= 0.9 and final.extras["clusters"] == 4
    events = [e for r in records for e in r.extras.get("split_events", []) if e["accepted"]]
    assert len(events) == 3
    members = {0: set(range(20))}  # cluster (model row) -> its clients
    for e in events:  # every split cuts its parent's global ids into two disjoint parts
        a, b = map(set, e["children"])
        assert a and b and not a & b and a | b == members[e["cluster"]]
        assert e["mean_norm"] < 0.4 and e["max_norm"] > 0.7 and gamma_check(e["gamma_max"], e["alpha_cross_max"])
        members[e["models"][0]], members[e["models"][1]] = a, b
    truth = np.array(final.true_clusters)
    for part in members.values():  # every final cluster is one true cluster
        assert len(set(truth[sorted(part)])) == 1
    # records: norms per cluster, the round's similarity matrix in participants order
    before = {0}
    for r in records:
        sim = np.array(r.extras["similarity"])
        assert sim.shape == (20, 20) and np.allclose(np.diag(sim), 1, atol=1e-3) and np.allclose(sim, sim.T)
        assert len(r.extras["update_norms"]) == 20
        assert {c["cluster"] for c in r.extras["cluster_norms"]} == before  # the clusters the round started with
        before = set(r.assignments)
    assert records[0].extras["cfl_params"]["eps1"] == 0.4


def test_iid_never_splits():
    records = run(partition="iid", rounds=25, seed=0)
    assert all(r.extras["clusters"] == 1 and r.models_in_use == 1 for r in records)
    assert not [e for r in records for e in r.extras.get("split_events", []) if e["accepted"]]
    assert records[-1].accuracy > 0.9


def test_a_split_that_fails_the_gamma_check_is_recorded_and_refused():
    records = run(partition="concept-shift", rounds=10, seed=0, options={"gamma_max": 1.0})
    events = [e for r in records for e in r.extras.get("split_events", [])]
    assert events and not any(e["accepted"] for e in events)
    assert all(e["gamma_bound"] < 1.0 for e in events)
    assert records[-1].extras["clusters"] == 1


def test_newcomers_descend_the_parameter_tree():
    records = run(partition="concept-shift", rounds=17, seed=0, newcomer_share=0.2, newcomer_round=15)
    late = records[15]
    newcomers = late.extras["newcomers"]
    assert len(newcomers) == 4 and all(records[14].assignments[c] == -1 for c in newcomers)
    assert records[14].extras["clusters"] == 4  # the tree was complete when they came
    truth = np.array(late.true_clusters)
    assignments = np.array(late.assignments)
    for c in newcomers:  # each joins the cluster of the clients of its own true cluster
        peers = [i for i in range(20) if truth[i] == truth[c] and i not in newcomers]
        assert assignments[c] == np.bincount(assignments[peers]).argmax()
    assert late.bytes_down > records[14].bytes_down  # the descent is paid for
    assert records[-1].ari == pytest.approx(1.0)


def test_same_seed_same_records():
    a = run(partition="concept-shift", rounds=10, seed=3, participation=0.8)
    b = run(partition="concept-shift", rounds=10, seed=3, participation=0.8)
    for x, y in zip(a, b):
        assert (x.assignments, x.client_accuracy, x.extras["similarity"], x.extras.get("split_events")) == \
               (y.assignments, y.client_accuracy, y.extras["similarity"], y.extras.get("split_events"))


def test_dashboard_views_draw_the_norms_splits_and_similarity():
    from cfl_ui.views import algorithm_views as AV

    records = run(partition="concept-shift", rounds=13, seed=0)
    embedding = AV.embedding_views("cfl", records, 12)
    assert embedding[0].title.startswith("CFL: cosine similarity") and embedding[0].per_round
    extra = AV.extra_views("cfl", records, None)
    titles = [v.title for v in extra]
    assert titles[:2] == ["CFL: update norms per cluster", "CFL: split events"]
    norms = extra[0].figure
    assert {s.line.dash for s in norms.data} == {None, "dash"}  # mean (solid) and max (dashed) per cluster
    assert len(norms.layout.shapes) >= 2 + 3  # eps1 and eps2 lines, the three split markers (and the warm-up)
    assert "Recorded: clusters" not in titles and "Recorded: largest_mean_norm" not in titles


def test_split_thresholds_default_per_model_family_and_options_override():
    def params(**changes):
        exp = Experiment(ExperimentConfig(**{**BASE, "partition": "concept-shift", "rounds": 1, **changes}))
        return exp._setup_extras["cfl_params"]

    assert (params()["eps1"], params()["eps2"]) == (0.4, 0.7)  # digits' MLP
    assert (params(model="logreg")["eps1"], params(model="logreg")["eps2"]) == (0.4, 0.55)
    assert params(model="cnn")["eps2"] == 1.4
    given = params(model="logreg", options={"eps1": 0.2, "eps2": 0.9, "gamma_max": 0.5})
    assert (given["eps1"], given["eps2"], given["gamma_max"]) == (0.2, 0.9, 0.5)
