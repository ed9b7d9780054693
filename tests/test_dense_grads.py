"""The hand-written backward of dense ReLU stacks (MLP, logistic regression) against autograd."""
import pytest
import torch

from cfl_core.engine.models import build_model, per_sample_loss
from cfl_core.engine.reference import train_sequential
from cfl_core.engine.training import TrainConfig, batch_schedule, masked_mean, train_batched
from tests.helpers import random_federation


def _inputs(name, copies=6, batch=9):
    gen = torch.Generator().manual_seed(4)
    spec = build_model(name, (1, 8, 8), 10, "classification")
    params = torch.stack([spec.init(0, i) for i in range(copies)])
    x = torch.rand(copies, batch, 1, 8, 8, generator=gen)
    y = torch.randint(0, 10, (copies, batch), generator=gen)
    valid = torch.rand(copies, batch, generator=gen) < 0.7
    valid[0] = False  # a copy with no sample this step: loss and gradients 0
    valid[1] = True
    return spec, params, x, y, valid


def _autograd(spec, params, x, y, valid):
    leaves = {k: v.detach().requires_grad_(True) for k, v in spec.views(params).items()}
    loss = masked_mean(per_sample_loss(spec.loss_kind, spec.apply(leaves, x), x, y), valid)
    return loss.detach(), torch.autograd.grad(loss.sum(), list(leaves.values()))


@pytest.mark.parametrize("name", ["mlp", "logreg"])
def test_hand_written_gradients_equal_autograd(name):
    spec, params, x, y, valid = _inputs(name)
    loss, grads = spec.loss_and_grads(spec.views(params), x, y, valid)
    want_loss, want = _autograd(spec, params, x, y, valid)
    assert torch.allclose(loss, want_loss, atol=1e-6)
    assert float(loss[0]) == 0.0
    assert len(grads) == len(want) == len(spec.slots)
    for got, ref, slot in zip(grads, want, spec.slots):
        assert got.shape == ref.shape, slot.name
        assert torch.allclose(got, ref, atol=1e-6), slot.name
        assert float(got[0].abs().max()) == 0.0
    assert float(sum(g.abs().sum() for g in grads)) > 0  # not trivially zero


def test_gradients_accumulate_into_momentum_buffers():
    spec, params, x, y, valid = _inputs("mlp")
    _, plain = spec.loss_and_grads(spec.views(params), x, y, valid)
    before = [torch.randn(g.shape, generator=torch.Generator().manual_seed(i)) for i, g in enumerate(plain)]
    acc = [b.clone() for b in before]
    _, out = spec.loss_and_grads(spec.views(params), x, y, valid, accumulate=acc, beta=0.9)
    for got, buf, b0, g in zip(out, acc, before, plain):
        assert got is buf  # updated in place
        assert torch.allclose(got, 0.9 * b0 + g, atol=1e-5)


def test_models_without_a_hand_written_backward_say_so():
    for name in ("cnn", "autoencoder"):
        spec, params, x, y, valid = _inputs("mlp")
        other = build_model(name, (1, 8, 8), 10, "classification")
        p = torch.stack([other.init(0, i) for i in range(len(x))])
        assert other.loss_and_grads(other.views(p), x, y, valid) is None


@pytest.mark.parametrize("sizes", [(40, 40), (13, 40)])
def test_momentum_folded_into_the_matmul_matches_the_reference(sizes, monkeypatch):
    # equal sizes: every step has every client, so momentum is folded into the gradient matmul;
    # unequal: steps where some clients sit out take the unfolded path. The torch path (the compiled
    # kernel, which would otherwise train this MLP, is tested in test_native.py)
    monkeypatch.setenv("CFL_NATIVE", "0")
    fed = random_federation(5, (1, 8, 8), 10, sizes=sizes)
    spec = build_model("mlp", (1, 8, 8), 10, "classification")
    ids = torch.arange(5)
    start = torch.stack([spec.init(0, i) for i in range(5)])
    cfg = TrainConfig(local_epochs=3, batch_size=8, lr=0.05, momentum=0.9)
    sched = batch_schedule(fed.n_train, ids, 0, 2, cfg)
    batched, loss = train_batched(spec, start, fed, ids, sched, cfg)
    reference, ref_loss = train_sequential(spec, start, fed, ids, sched, cfg)
    assert (reference - start).abs().max() > 1e-3
    assert torch.allclose(batched, reference, atol=1e-5, rtol=0)
    assert torch.allclose(loss, ref_loss, atol=1e-5)
