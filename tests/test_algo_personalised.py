"""FedProx, Per-FedAvg, FedProto, FedALA and FedPAC: each rule on small constructed cases, their records (ARI not
applicable, never 0) and their traffic."""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from cfl_core.algorithms.fedpac import combination_weights, solve_simplex_qp
from cfl_core.algorithms.fedproto import aggregate_prototypes
from cfl_core.config import ExperimentConfig
from cfl_core.engine.core import Engine
from cfl_core.engine.federation import Federation
from cfl_core.engine.models import build_model
from cfl_core.engine.training import TrainConfig
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment
from cfl_core.records import summarize

SMALL = dict(dataset="digits", partition="concept-shift", clusters=2, clients_per_cluster=3, samples_per_client=40,
             device="cpu", rounds=3)
PERSONALISED = ["fedprox", "perfedavg", "fedproto", "fedala", "fedpac"]


def _exp(**changes) -> Experiment:
    return Experiment(ExperimentConfig(**{**SMALL, **changes}))


@pytest.mark.parametrize("name", PERSONALISED)
def test_ari_is_not_applicable_rather_than_zero_and_models_are_ignored(name):
    exp = _exp(algorithm=name, models=7)  # --models is ignored, not refused
    records = list(exp)
    summary = exp.close()
    for r in records:
        assert r.ari is None and r.nmi is None
        assert r.extras["ari_applicable"] is False and r.extras["ari_note"]
        assert all(a is not None for a in r.client_accuracy)
    assert summary["final_ari"] is None and summary["first_round_ari_0_9"] is None
    assert json.loads(records[-1].to_json())["ari"] is None


def test_fedprox_with_mu_0_is_fedavg():
    prox = [json.loads(r.to_json()) for r in _exp(algorithm="fedprox", options={"mu": 0.0})]
    avg = [json.loads(r.to_json()) for r in _exp(algorithm="fedavg")]
    for a, b in zip(prox, avg):
        for key in ("client_accuracy", "client_loss", "train_loss", "bytes_down", "bytes_up", "assignments"):
            assert a[key] == b[key], key


def test_fedprox_keeps_the_global_model_nearer_its_start_as_mu_grows():
    start = _exp(algorithm="fedprox").algorithm.base_model()

    def moved(mu):
        exp = _exp(algorithm="fedprox", rounds=1, options={"mu": mu})
        list(exp)
        return float((exp.algorithm.models[0] - start).norm())

    assert moved(10.0) < moved(0.1) < moved(0.0)


def test_perfedavg_tests_each_client_after_one_sgd_step_of_its_own():
    exp = _exp(algorithm="perfedavg", rounds=1, options={"alpha": 0.2})
    record = exp.step()
    algo, engine, spec, fed = exp.algorithm, exp.engine, exp.spec, exp.federation
    clients = torch.arange(fed.num_clients)
    adapt = TrainConfig(local_epochs=1, batch_size=exp.config.batch_size, lr=0.2, optimizer="sgd", momentum=0.0)
    from cfl_core.engine.seeding import derive_seed
    schedule = engine.schedule(clients, derive_seed(exp.config.seed, "perfedavg", "adapt", 0) % 2**31, adapt)
    for c in range(fed.num_clients):
        rows = schedule.idx[0, c][schedule.valid[0, c]]
        w = algo.models[0].clone().requires_grad_(True)
        x, y = fed.x_train[c, rows], fed.y_train[c, rows]
        loss = torch.nn.functional.cross_entropy(spec.forward(w[None], x[None])[0], y)
        (grad,) = torch.autograd.grad(loss, w)
        adapted = (w - 0.2 * grad).detach()
        n = int(fed.n_test[c])
        out = spec.forward(adapted[None], fed.x_test[c : c + 1, :n])[0]
        assert record.client_accuracy[c] == pytest.approx(float((out.argmax(1) == fed.y_test[c, :n]).float().mean()),
                                                          abs=1e-6)
    plain = engine.evaluate(algo.models, torch.zeros(fed.num_clients, dtype=torch.int64))
    assert not torch.allclose(plain.loss, torch.tensor(record.client_loss), atol=1e-4)


def test_prototypes_are_count_weighted_and_classes_nobody_holds_keep_their_value():
    means = torch.tensor([[[1.0, 0.0], [0.0, 0.0], [5.0, 5.0]], [[3.0, 0.0], [0.0, 0.0], [0.0, 0.0]]])
    counts = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 0.0]])
    previous = torch.full((3, 2), 9.0)
    protos, known = aggregate_prototypes(means, counts, previous, torch.tensor([False, True, False]))
    assert torch.allclose(protos, torch.tensor([[2.5, 0.0], [9.0, 9.0], [5.0, 5.0]]))
    assert known.tolist() == [True, True, True]


def _blob_federation():
    """Inputs at the class centres e_0, e_1, e_2 of R^3 (plus a little noise): prototypes classify them."""
    gen = torch.Generator().manual_seed(0)
    clients = []
    for i in range(2):
        y = torch.arange(12) % 3
        x = torch.eye(3)[y] + 0.05 * torch.randn(12, 3, generator=gen)
        clients.append(SimpleNamespace(x_train=x, y_train=y, x_test=x, y_test=y, cluster=0))
    return Federation.from_clients(clients, "classification", 3, torch.device("cpu"))


def test_nearest_prototype_prediction_and_a_class_without_a_prototype():
    fed = _blob_federation()
    spec = build_model("logreg", (3,), 3, "classification")  # its features are its inputs
    engine = Engine(spec, fed, TrainConfig(), seed=0)
    models = torch.zeros(2, spec.dim)  # a head that knows nothing: only the prototypes can be right
    ids = torch.arange(2)
    every = engine.evaluate(models, ids, ids, prototypes=torch.eye(3))
    assert torch.allclose(every.accuracy, torch.ones(2))
    mask = torch.tensor([True, True, False])
    partial = engine.evaluate(models, ids, ids, prototypes=torch.eye(3), prototype_mask=mask)
    assert torch.allclose(partial.accuracy, torch.full((2,), 2 / 3))
    assert torch.isfinite(partial.loss).all() and (partial.loss > math.log(3) / 3 - 1e-6).all()


def test_fedproto_sends_prototypes_never_models():
    exp = _exp(algorithm="fedproto")
    r0, r1 = exp.step(), exp.step()
    classes, dim, p = 10, exp.spec.feature_dim, 6
    stats = exp.engine.feature_statistics(exp.algorithm.models, torch.arange(p))
    held = (stats.count > 0).sum(1)
    assert r0.bytes_down == 0  # no global prototypes yet
    assert r0.bytes_up == int((held * dim + classes).sum()) * 4
    assert r1.bytes_down == p * r0.extras["prototype_classes"] * dim * 4
    assert r1.bytes_up == int((held * dim + classes).sum()) * 4
    assert r0.bytes_down + r1.bytes_down < exp.spec.bytes_per_model  # far below one model


def test_fedproto_clients_train_their_own_models_alone_in_the_first_round():
    exp = _exp(algorithm="fedproto", rounds=1)
    exp.step()
    ids = torch.arange(6)
    alone, _ = exp.engine.train_without_exchange(exp.algorithm.base_model().expand(6, -1), ids, 0)
    assert torch.equal(exp.algorithm.models, alone)


def test_fedala_skips_mixing_at_first_then_keeps_lower_layers_global_and_learns_weights_in_0_1():
    exp = _exp(algorithm="fedala", rounds=3)
    r0 = exp.step()
    assert r0.extras["ala_passes"] == [0] * 6  # local == global: nothing to mix
    algo = exp.algorithm
    before_local = algo.local.clone()
    r1 = exp.step()
    assert all(p > 1 for p in r1.extras["ala_passes"])  # the start phase
    r2 = exp.step()
    assert r2.extras["ala_passes"] == [1] * 6
    assert ((algo.weights >= 0) & (algo.weights <= 1)).all()
    assert not torch.equal(algo.weights[:, algo.mixed], torch.ones_like(algo.weights[:, algo.mixed]))
    mb = exp.spec.bytes_per_model
    assert all((r.bytes_down, r.bytes_up) == (6 * mb, 6 * mb) for r in (r0, r1, r2))
    # the engine's ALA: lower layers are the received model exactly, upper ones between local and global
    glob = algo.global_model
    start, w, _ = exp.engine.adaptive_local_aggregation(glob, torch.zeros(6, dtype=torch.int64), before_local,
                                                        torch.ones_like(before_local), algo.mixed, torch.arange(6),
                                                        1, 0.8, torch.ones(6, dtype=torch.long), 1.0, 0.1, 10)
    assert torch.equal(start[:, ~algo.mixed], glob.expand(6, -1)[:, ~algo.mixed])
    lo, hi = torch.minimum(before_local, glob), torch.maximum(before_local, glob)
    assert ((start[:, algo.mixed] >= lo[:, algo.mixed] - 1e-6) & (start[:, algo.mixed] <= hi[:, algo.mixed] + 1e-6)).all()


def test_simplex_qp_on_known_problems():
    assert np.allclose(solve_simplex_qp(np.diag([1.0, 2.0, 4.0])), np.array([4, 2, 1]) / 7, atol=1e-6)
    q = np.array([[1.0, 1.0], [1.0, 1.0]]) + np.diag([0.0, 5.0])
    assert np.allclose(solve_simplex_qp(q), [1.0, 0.0], atol=1e-6)  # the second only adds variance


def test_fedpac_combines_the_heads_of_clients_whose_features_look_alike():
    means = torch.zeros(3, 2, 4)
    means[:2, 0, 0] = 1.0  # clients 0 and 1 alike, client 2 not
    means[2, 1, 3] = 5.0
    counts = torch.tensor([[10.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    sq = (means ** 2).sum(-1) + 0.01  # a little variance each
    a = combination_weights(means, counts, sq)
    assert np.allclose(a.sum(1), 1.0)
    assert a[0, 2] == 0 and a[0, 0] == pytest.approx(0.5, abs=1e-3) and a[0, 1] == pytest.approx(0.5, abs=1e-3)
    assert a[2, 2] == pytest.approx(1.0)


def test_fedpac_shares_one_extractor_personalises_heads_and_counts_what_it_sends():
    exp = _exp(algorithm="fedpac")
    r0, r1 = exp.step(), exp.step()
    algo = exp.algorithm
    body = ~algo.head
    assert torch.equal(algo.personal[:, body], algo.personal[:1, body].expand(6, -1))
    assert not torch.equal(algo.personal[:, algo.head], algo.personal[:1, algo.head].expand(6, -1))
    assert np.allclose(np.array(r1.extras["head_weights"]).sum(1), 1.0, atol=1e-3)  # recorded to 4 decimals
    mb, dim, classes = exp.spec.bytes_per_model, exp.spec.feature_dim, 10
    stats = exp.engine.feature_statistics(algo.personal, torch.arange(6))
    held = (stats.count > 0).sum(1)
    up_stats = int((2 * held + classes).sum() + held.sum() * (dim - 1)) * 4  # prototypes, counts, norms
    assert r0.bytes_down == 6 * mb and r0.bytes_up == 6 * mb + up_stats
    # from round 1: the global prototypes (or the client's own for classes without one) go down too
    assert r1.bytes_down == 6 * mb + int(held.sum()) * dim * 4
    assert r1.bytes_up == 6 * mb + up_stats


@pytest.mark.parametrize("name", ["fedproto", "fedpac"])
def test_prototype_algorithms_refuse_runs_without_class_labels(name):
    with pytest.raises(ConfigError, match="unsupervised"):
        ExperimentConfig(**{**SMALL, "partition": "feature-skew"}, algorithm=name, unsupervised=True,
                         optimizer="adam").validate()
    with pytest.raises(ConfigError, match="classification"):
        ExperimentConfig(dataset="synthetic-linear", partition="linear-mixture", algorithm=name).validate()


@pytest.mark.parametrize("name", PERSONALISED)
def test_gradient_aggregation_is_refused(name):
    with pytest.raises(ConfigError, match="aggregation"):
        ExperimentConfig(**SMALL, algorithm=name, aggregation="gradient").validate()


@pytest.mark.parametrize("name", ["fedprox", "perfedavg", "fedala", "kfed", "pacfl"])
def test_label_free_algorithms_run_unsupervised_and_on_regression(name):
    models = 2 if name in ("kfed", "pacfl") else None
    unsup = _exp(algorithm=name, models=models, partition="feature-skew", unsupervised=True, optimizer="adam",
                 lr=0.01, rounds=2)
    records = list(unsup)
    assert records[-1].accuracy is None and records[-1].loss is not None
    linear = Experiment(ExperimentConfig(dataset="synthetic-linear", partition="linear-mixture", clusters=2,
                                         clients_per_cluster=3, algorithm=name, models=models, rounds=2,
                                         device="cpu"))
    assert list(linear)[-1].loss is not None


def test_summaries_keep_a_null_ari_null():
    records = list(_exp(algorithm="fedproto", rounds=2))
    summary = summarize("fedproto", records, "finished")
    assert summary["final_ari"] is None and summary["final_nmi"] is None


def test_the_summary_and_the_cli_say_not_applicable(tmp_path, capsys):
    from cfl_core.cli import main

    assert main(["run", "--algorithm", "fedprox", "--dataset", "digits", "--partition", "concept-shift", "--clusters",
                 "2", "--clients-per-cluster", "2", "--samples-per-client", "20", "--rounds", "1", "--device", "cpu",
                 "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr()
    assert "ARI not applicable" in out.out + out.err and "never" not in out.out + out.err
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["ari_applicable"] is False and summary["final_ari"] is None
    assert "ari_applicable" not in summarize("fedavg", list(_exp(algorithm="fedavg", rounds=1)), "finished")
