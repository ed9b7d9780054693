"""The CNN's loss-matrix pass with the models' convolutions stacked (issue 38) against one model at a time."""
import pytest
import torch

from cfl_core.engine import cnn
from cfl_core.engine.core import Engine
from cfl_core.engine.models import build_model
from cfl_core.engine.reference import reference_loss_matrix
from cfl_core.engine.spec import ModelSpec
from cfl_core.engine.training import TrainConfig
from tests.helpers import random_federation


def _models(spec, count):
    return torch.stack([spec.init(3, "shared", i) for i in range(count)])


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32), (1, 8, 8)])
@pytest.mark.parametrize("models,samples", [(2, 300), (4, 1000), (5, 37), (8, 64)])
def test_stacked_models_give_what_each_model_gives_alone(shape, models, samples):
    spec = build_model("cnn", shape, 10, "classification")
    flat = _models(spec, models)
    x = torch.rand(1, samples, *shape, generator=torch.Generator().manual_seed(samples))
    with torch.no_grad():
        stacked = spec.forward_shared(flat, x)
        alone = ModelSpec.forward_shared(spec, flat, x)  # the family-neutral default: one model at a time
    assert stacked.shape == (models, samples, 10)
    # the same per-channel sums in the same order (bit-equal on this machine); a looser bound for other CPUs
    assert torch.allclose(stacked, alone, rtol=1e-5, atol=1e-6)


def test_slices_cover_every_sample_once():
    # 4 models: slices of STACKED_SAMPLES // 4 samples; a batch that is not a multiple of it keeps every sample
    spec = build_model("cnn", (1, 28, 28), 10, "classification")
    flat = _models(spec, 4)
    step = cnn.STACKED_SAMPLES // 4
    x = torch.rand(1, 2 * step + 5, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        whole = spec.forward_shared(flat, x)
        tail = spec.forward_shared(flat, x[:, -5:])
    assert torch.allclose(whole[:, -5:], tail, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("models", [1, 3, 9, 10])  # 9 and 10: more than MODELS_STACKED, passed 8 at a time
def test_the_loss_matrix_of_many_models_matches_the_reference_loop(models):
    assert cnn.MODELS_STACKED < 9
    fed = random_federation(5, (1, 28, 28), 10)
    spec = build_model("cnn", (1, 28, 28), 10, "classification")
    engine = Engine(spec, fed, TrainConfig(), seed=0, memory_budget_mb=4)  # small budget: several chunks
    flat = _models(spec, models)
    ids = torch.arange(5)
    got = engine.loss_matrix(flat, ids, uploads=False)
    assert torch.allclose(got, reference_loss_matrix(spec, flat, fed, ids), atol=1e-5)
    losses, valid = engine.sample_losses(flat, ids)
    per_client = (losses * valid[..., None]).sum(1) / valid.sum(1, keepdim=True)
    assert torch.allclose(per_client, got, atol=1e-5)
