"""The new algorithms on the sequential reference engine (one client after another, plain torch.nn +
torch.optim, bench/reference.py) make the same models as on the batched engine: every engine operation they
use (proximal and feature terms, frozen layers, meta steps, adaptive mixing) is checked end to end."""
from __future__ import annotations

import pytest
import torch

from cfl_core.bench.reference import SequentialEngine
from cfl_core.config import ExperimentConfig
from cfl_core.experiment import Experiment

SMALL = dict(dataset="digits", partition="concept-shift", clusters=2, clients_per_cluster=2, samples_per_client=24,
             rounds=2, device="cpu")


def _on_reference(exp: Experiment) -> Experiment:
    seq = SequentialEngine(exp.spec, exp.federation, exp.engine.train_cfg, exp.config.seed, exp.config.aggregation)
    exp.engine = exp.algorithm.engine = exp.algorithm.ctx.engine = seq
    return exp


@pytest.mark.parametrize("name,options", [("fedprox", {"mu": 0.5}), ("perfedavg", {"variant": "hf"}),
                                          ("fedproto", {}), ("fedala", {}), ("fedpac", {})])
def test_batched_and_sequential_engines_make_the_same_models(name, options):
    cfg = ExperimentConfig(**SMALL, algorithm=name, options=options)
    batched, reference = Experiment(cfg), _on_reference(Experiment(cfg))
    for _ in range(cfg.rounds):
        a, b = batched.step(), reference.step()
        assert (a.bytes_down, a.bytes_up) == (b.bytes_down, b.bytes_up)
    tol = 2e-4 if name == "perfedavg" else 2e-5  # finite differences magnify float rounding
    assert torch.allclose(batched.algorithm.eval_models()[0], reference.algorithm.eval_models()[0], atol=tol)
