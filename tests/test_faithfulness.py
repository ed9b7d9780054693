"""The authors'-code variants (docs/faithfulness.md): each option changes what it should, and nothing else."""
from __future__ import annotations

import pytest
import torch

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
