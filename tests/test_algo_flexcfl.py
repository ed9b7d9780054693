"""FlexCFL and FedGroup: the shift measure, cold starts, migration under swap-part, inter-group aggregation."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import wasserstein_distance

from cfl_core.algorithms.flexcfl import label_shift, madc_matrix
from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment


# label-skew-1 with 4 clusters on digits: labels {0,1,2}, {3,4,5}, {6,7}, {8,9}; 53 samples per client at most
BASE = dict(dataset="digits", partition="label-skew-1", clusters=4, clients_per_cluster=5, samples_per_client=50,
            models=4, device="cpu")
# The swap-part comparison: clients of a cluster hold their labels in Dirichlet(0.3) proportions, so the
# label a client gives away is often most of its data; one cross-cluster pair swaps every round from round 1.
SWAP_PART = dict(within="dirichlet", alpha=0.3, rounds=16, shift="swap-part",
                 shift_options={"probability": 1.0, "pairs": 1, "across_clusters": True})


def run(**changes):
    return list(Experiment(ExperimentConfig(**{**BASE, **changes})))


def reference_code_measure(old_counts, new_counts) -> float:
    """The authors' code: the count vectors passed as samples, i.e. sorted counts compared."""
    return float(wasserstein_distance(old_counts, new_counts))


def test_wasserstein_over_label_positions_sees_a_label_swap_that_sorted_counts_miss():
    old = np.zeros(10)
    old[[3, 4]] = 30  # a client with 30 threes and 30 fours ...
    new = np.zeros(10)
    new[[7, 4]] = 30  # ... trades all its threes for sevens
    assert reference_code_measure(old, new) == 0.0  # same sorted counts: the reference never migrates it
    assert label_shift(old, new) == pytest.approx(0.5 * 4)  # half the data moved 4 label positions
    assert label_shift(old, new) > 0.2
    small = old.copy()
    small[3], small[4] = 25, 35  # 5 of 60 samples changed label (to a neighbour): below 20% of the data
    assert label_shift(old, small) == pytest.approx(5 / 60)
    assert label_shift(old, old * 2) == 0.0  # more data, same mix: no shift


def test_the_distance_is_at_least_the_share_of_data_that_changed_label():
    rng = np.random.default_rng(1)
    for _ in range(50):
        a, b = rng.integers(0, 20, 10).astype(float), rng.integers(0, 20, 10).astype(float)
        total_variation = 0.5 * np.abs(a / a.sum() - b / b.sum()).sum()
        assert label_shift(a, b) >= total_variation - 1e-12


def test_madc_is_the_mean_absolute_difference_of_cosine_profiles():
    rng = np.random.default_rng(0)
    u = rng.normal(size=(5, 7))
    cos = (u / np.linalg.norm(u, axis=1, keepdims=True)) @ (u / np.linalg.norm(u, axis=1, keepdims=True)).T
    madc = madc_matrix(u)
    i, j = 1, 3
    others = [k for k in range(5) if k not in (i, j)]
    assert madc[i, j] == pytest.approx(np.mean([abs(cos[i, k] - cos[j, k]) for k in others]))
    assert np.allclose(madc, madc.T) and np.allclose(np.diag(madc), 0)


@pytest.mark.parametrize("algorithm,measure", [("flexcfl", "edc"), ("fedgroup", "edc"), ("fedgroup", "madc")])
def test_cold_start_finds_the_label_skew_groups(algorithm, measure):
    records = run(algorithm=algorithm, rounds=4, seed=0, options={"measure": measure})
    assert records[0].ari >= 0.9 and records[-1].ari >= 0.9
    assert records[-1].accuracy > 0.9
    first = records[0].extras
    assert len(first["edc"]) == 20 and all(len(row) == 4 for row in first["edc"])
    assert first["cold_start"]["measure"] == measure and sum(first["cold_start"]["group_sizes"]) == 20
    assert records[0].bytes_down > records[1].bytes_down  # the pre-training is paid for at setup


def test_fedgroup_ari_over_seeds():
    for seed in (1, 2):
        assert run(algorithm="fedgroup", rounds=1, seed=seed)[0].ari >= 0.9


def test_migration_keeps_accuracy_above_fedgroup_under_swap_part():
    for seed in (0, 1, 2):
        flex = run(algorithm="flexcfl", seed=seed, **SWAP_PART)
        static = run(algorithm="fedgroup", seed=seed, **SWAP_PART)
        assert [r.true_clusters for r in flex] == [r.true_clusters for r in static]  # the same shifts
        mean_flex = np.mean([r.accuracy for r in flex[1:]])
        mean_static = np.mean([r.accuracy for r in static[1:]])
        assert mean_flex > mean_static + 0.03, (seed, mean_flex, mean_static)
        migrations = [m for r in flex for m in r.extras["migrations"]]
        assert migrations and all(m["emd"] > 0.2 for m in migrations)
        assert any(m["from"] != m["to"] for m in migrations)
        assert all("migrations" not in r.extras for r in static)


def test_newcomers_cold_start_into_their_group():
    records = run(algorithm="flexcfl", rounds=4, seed=0, newcomer_share=0.2, newcomer_round=2)
    newcomers = records[2].extras["newcomers"]
    assert len(newcomers) == 4 and all(records[1].assignments[c] == -1 for c in newcomers)
    assert records[2].ari >= 0.9  # newcomers included
    assert all(records[2].extras["edc"][c] is not None for c in newcomers)


def test_inter_group_aggregation():
    exp = Experiment(ExperimentConfig(**BASE, algorithm="flexcfl", rounds=2, options={"eta_g": 0.5}))
    algo = exp.algorithm
    old = torch.zeros(4, 3)
    new = torch.tensor([[1.0, 0, 0], [0, 2.0, 0], [0, 0, 3.0], [0, 0, 0]])
    trained = torch.tensor([True, True, True, False])
    mixed = algo._inter_group(old, new, trained)
    assert torch.allclose(mixed[0], torch.tensor([1.0, 0.5, 0.5]))  # + 0.5 x unit updates of groups 1 and 2
    assert torch.allclose(mixed[3], new[3])  # a group that did not train is left alone
    exp = Experiment(ExperimentConfig(**BASE, algorithm="flexcfl", rounds=2,
                                      options={"eta_g": 0.5, "inter_group": "models"}))
    mixed = exp.algorithm._inter_group(old, new, trained)
    w = torch.tensor([1.0, 0.25, 0.5 / 3])  # own weight 1, others eta / ||theta_h||
    assert torch.allclose(mixed[0], (w[:, None] * new[:3]).sum(0) / w.sum())
    assert torch.equal(algo._inter_group(old, new, trained.logical_and(torch.tensor([1, 0, 0, 0]).bool())), new)


def test_options_are_validated():
    with pytest.raises(ConfigError, match="options.measure"):
        ExperimentConfig(**BASE, algorithm="flexcfl", options={"measure": "ward"}).validate()
    with pytest.raises(ConfigError, match="options.shift_threshold"):
        ExperimentConfig(**BASE, algorithm="fedgroup", options={"shift_threshold": 0.3}).validate()  # not fedgroup's
    with pytest.raises(ConfigError, match="options.shift_threshold"):
        ExperimentConfig(**BASE, algorithm="flexcfl", options={"shift_threshold": 0}).validate()
    with pytest.raises(ConfigError, match="models"):
        ExperimentConfig(**{**BASE, "models": 17}, algorithm="flexcfl", newcomer_share=0.2, newcomer_round=1).validate()
    with pytest.raises(ConfigError, match="models"):
        ExperimentConfig(**{**BASE, "models": None}, algorithm="fedgroup").validate()


def test_same_seed_same_records():
    a = run(algorithm="flexcfl", seed=4, **{**SWAP_PART, "rounds": 6})
    b = run(algorithm="flexcfl", seed=4, **{**SWAP_PART, "rounds": 6})
    for x, y in zip(a, b):
        assert (x.assignments, x.client_accuracy, x.extras.get("edc"), x.extras.get("migrations")) == \
               (y.assignments, y.client_accuracy, y.extras.get("edc"), y.extras.get("migrations"))


def test_dashboard_views_show_the_edc_embedding_and_migrations():
    from cfl_ui.views import algorithm_views as AV

    records = run(algorithm="flexcfl", seed=0, newcomer_share=0.2, newcomer_round=2, **{**SWAP_PART, "rounds": 5})
    embedding = AV.embedding_views("flexcfl", records, 4)
    assert embedding and embedding[0].title == "FlexCFL: clients by their EDC features"
    assert [v.title for v in AV.extra_views("flexcfl", records, None)][0] == "FlexCFL: migrations"
    assert AV.embedding_views("fedgroup", run(algorithm="fedgroup", rounds=2, seed=0), None)
