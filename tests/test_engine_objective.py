"""The training path's general capabilities (proximal anchor, feature term, per-slot learning rates, meta steps,
FedALA's mixing) against the sequential reference, which writes each of them the plain torch way."""
import pytest
import torch

from cfl_core.engine.models import build_model
from cfl_core.engine.objective import MetaStep, Objective, lr_scales
from cfl_core.engine.reference import learn_mixing_sequential, train_sequential
from cfl_core.engine.training import TrainConfig, batch_schedule, learn_mixing, train_batched
from tests.helpers import random_federation

FAMILIES = [("mlp", (1, 8, 8)), ("logreg", (1, 8, 8)), ("cnn", (1, 8, 8))]


def _setup(name, shape, clients=4, classes=10):
    fed = random_federation(clients, shape, classes)
    spec = build_model(name, shape, classes, "classification")
    ids = torch.arange(clients)
    start = torch.stack([spec.init(0, i) for i in range(clients)])
    return fed, spec, ids, start


def _both(spec, start, fed, ids, cfg, objective, stream=3):
    sched = batch_schedule(fed.n_train, ids, seed=0, stream=stream, cfg=cfg)
    batched = train_batched(spec, start, fed, ids, sched, cfg, objective=objective)
    reference = train_sequential(spec, start, fed, ids, sched, cfg, objective=objective)
    return batched, reference


SGD = TrainConfig(local_epochs=2, batch_size=16, lr=0.05)
ADAM = TrainConfig(local_epochs=2, batch_size=16, lr=0.01, optimizer="adam")


@pytest.mark.parametrize("name,shape", FAMILIES)
@pytest.mark.parametrize("cfg", [SGD, ADAM], ids=["sgd", "adam"])
def test_proximal_term_matches_the_reference_and_pulls_towards_the_anchor(name, shape, cfg):
    fed, spec, ids, start = _setup(name, shape)
    prox = Objective(prox_mu=0.5)
    (batched, loss), (reference, ref_loss) = _both(spec, start, fed, ids, cfg, prox)
    tol = 1e-5 if cfg.optimizer == "sgd" else 5e-4
    assert torch.allclose(batched, reference, atol=tol, rtol=0)
    assert torch.allclose(loss, ref_loss, atol=1e-5)
    plain, _ = _both(spec, start, fed, ids, cfg, None)[0]
    assert (batched - start).norm(dim=1).lt((plain - start).norm(dim=1)).all()  # closer to where it started


def test_a_strong_proximal_term_keeps_the_model_at_an_explicit_anchor():
    fed, spec, ids, start = _setup("mlp", (1, 8, 8))
    anchor = torch.stack([spec.init(5, i) for i in range(len(ids))])
    cfg = TrainConfig(local_epochs=3, batch_size=16, lr=0.05, momentum=0.0)
    (batched, _), (reference, _) = _both(spec, start, fed, ids, cfg, Objective(prox_mu=10.0, anchor=anchor))
    assert torch.allclose(batched, reference, atol=1e-5)
    assert (batched - anchor).norm(dim=1).lt(0.2 * (start - anchor).norm(dim=1)).all()


def test_a_plain_objective_is_the_fast_path_bit_for_bit():
    fed, spec, ids, start = _setup("mlp", (1, 8, 8))
    sched = batch_schedule(fed.n_train, ids, 0, 0, SGD)
    a, la = train_batched(spec, start, fed, ids, sched, SGD)
    b, lb = train_batched(spec, start, fed, ids, sched, SGD, objective=Objective(lr_scale=(1.0,) * 4))
    assert torch.equal(a, b) and torch.equal(la, lb)


@pytest.mark.parametrize("name,shape", FAMILIES)
def test_feature_term_matches_the_reference_and_moves_features_to_their_targets(name, shape):
    fed, spec, ids, start = _setup(name, shape)
    gen = torch.Generator().manual_seed(1)
    targets = torch.rand(len(ids), 10, spec.feature_dim, generator=gen)
    mask = torch.rand(len(ids), 10, generator=gen) > 0.3
    objective = Objective(feature_weight=2.0, feature_targets=targets, feature_mask=mask)
    (batched, loss), (reference, ref_loss) = _both(spec, start, fed, ids, SGD, objective)
    assert torch.allclose(batched, reference, atol=1e-5)
    assert torch.allclose(loss, ref_loss, atol=1e-5)
    if name == "logreg":
        plain, _ = _both(spec, start, fed, ids, SGD, None)[0]
        assert torch.allclose(batched, plain, atol=1e-6)  # its features are the inputs: the term is constant
        return

    def distance(params):
        f = spec.features(spec.views(params), fed.x_train)
        t = torch.gather(targets, 1, fed.y_train[..., None].expand(-1, -1, targets.shape[-1]))
        keep = torch.gather(mask, 1, fed.y_train) & fed.train_mask()
        return (((f - t) ** 2).mean(-1) * keep).sum() / keep.sum()

    plain, _ = _both(spec, start, fed, ids, SGD, None)[0]
    assert distance(batched) < distance(plain)


@pytest.mark.parametrize("name,shape", FAMILIES[:1] + FAMILIES[2:])
def test_frozen_and_scaled_layers_match_the_reference_and_frozen_ones_do_not_move(name, shape):
    fed, spec, ids, start = _setup(name, shape)
    head = spec.head_layer
    scales = lr_scales(spec, trained={head, spec.layer_names()[0]}, scales={head: 0.5})
    (batched, _), (reference, _) = _both(spec, start, fed, ids, SGD, Objective(lr_scale=scales))
    assert torch.allclose(batched, reference, atol=1e-5)
    frozen = ~spec.layer_mask({head, spec.layer_names()[0]})
    if frozen.any():
        assert torch.equal(batched[:, frozen], start[:, frozen])
    assert not torch.equal(batched[:, spec.layer_mask({head})], start[:, spec.layer_mask({head})])


@pytest.mark.parametrize("name,shape", FAMILIES)
@pytest.mark.parametrize("hessian", ["none", "finite-difference"])
def test_meta_steps_match_the_reference(name, shape, hessian):
    fed, spec, ids, start = _setup(name, shape)
    cfg = TrainConfig(local_epochs=2, batch_size=8, lr=0.05)
    meta = Objective(meta=MetaStep(alpha=0.05, hessian=hessian, delta=1e-2))
    (batched, loss), (reference, ref_loss) = _both(spec, start, fed, ids, cfg, meta)
    assert (batched - start).abs().max() > 1e-3
    # finite differences of float32 gradients amplify rounding
    assert torch.allclose(batched, reference, atol=1e-5 if hessian == "none" else 2e-4)
    assert torch.allclose(loss, ref_loss, atol=1e-5)
    plain, _ = _both(spec, start, fed, ids, cfg, None)[0]
    assert not torch.allclose(batched, plain, atol=1e-3)


def test_the_hessian_free_step_differs_from_the_first_order_one():
    fed, spec, ids, start = _setup("mlp", (1, 8, 8))
    cfg = TrainConfig(local_epochs=2, batch_size=8, lr=0.05)
    sched = batch_schedule(fed.n_train, ids, 0, 1, cfg)
    fo, _ = train_batched(spec, start, fed, ids, sched, cfg, objective=Objective(meta=MetaStep(0.1)))
    hf, _ = train_batched(spec, start, fed, ids, sched, cfg,
                          objective=Objective(meta=MetaStep(0.1, "finite-difference", 1e-2)))
    assert (fo - hf).abs().max() > 1e-5


@pytest.mark.parametrize("name,shape", FAMILIES[:1] + FAMILIES[2:])
def test_adaptive_mixing_matches_the_reference(name, shape):
    fed, spec, ids, start = _setup(name, shape)
    received = torch.stack([spec.init(9, i) for i in range(len(ids))])
    weights = torch.ones_like(start)
    mixed = spec.layer_mask({spec.head_layer})
    cfg = TrainConfig(local_epochs=1, batch_size=8)
    sched = batch_schedule(fed.n_train, ids, 0, 2, cfg).share(0.8, fed.n_train)
    passes = torch.tensor([1, 3, 20, 20])
    out = learn_mixing(spec, start, received, weights, mixed, fed, ids, sched, 1.0, passes, 0.02, 3)
    ref = learn_mixing_sequential(spec, start, received, weights, mixed, fed, ids, sched, 1.0, passes, 0.02, 3)
    assert torch.equal(out[2], ref[2])
    assert out[2][0] == 1 and out[2][1] == 3 and (out[2][2:] > 3).all()
    assert torch.allclose(out[1], ref[1], atol=1e-5) and torch.allclose(out[0], ref[0], atol=1e-5)
    assert torch.equal(out[0][:, ~mixed], received[:, ~mixed])  # lower layers: the received model exactly
    assert ((out[1] >= 0) & (out[1] <= 1)).all() and not torch.equal(out[1][:, mixed], weights[:, mixed])


def test_a_share_keeps_that_many_samples_of_one_epoch():
    fed = random_federation(3, (1, 8, 8), 10, sizes=(10, 41))
    ids = torch.arange(3)
    sched = batch_schedule(fed.n_train, ids, 0, 0, TrainConfig(local_epochs=1, batch_size=7)).share(0.5, fed.n_train)
    for i, n in enumerate(fed.n_train.tolist()):
        used = sched.idx[:, i][sched.valid[:, i]]
        assert len(used) == -(-n // 2) and len(set(used.tolist())) == len(used)


@pytest.mark.parametrize("name,shape", FAMILIES)
def test_features_feed_the_head_and_match_the_reference_modules(name, shape):
    fed, spec, ids, start = _setup(name, shape)
    p = spec.views(start)
    x = fed.x_train[:, :5]
    assert torch.allclose(spec.head(p, spec.features(p, x)), spec.apply(p, x), atol=1e-6)
    module = spec.reference_module()
    spec.load_into(module, start[1])
    assert torch.allclose(module.features(x[1]), spec.features(spec.views(start[1:2]), x[1:2])[0], atol=1e-5)


@pytest.mark.parametrize("name,shape", FAMILIES)
@pytest.mark.parametrize("cfg", [SGD, ADAM], ids=["sgd", "adam"])
def test_sample_weights_match_the_reference_and_a_zero_weight_sample_teaches_nothing(name, shape, cfg):
    """FedRC's per-sample weights: the batched path equals torch's weighted loss; weights of 1 are plain training,
    weights of 0 leave the model where it started, and the reported loss is the plain data loss either way."""
    fed, spec, ids, start = _setup(name, shape)
    n_max = int(fed.x_train.shape[1])
    weights = torch.rand(len(ids), n_max, generator=torch.Generator().manual_seed(1))
    (batched, loss), (reference, ref_loss) = _both(spec, start, fed, ids, cfg, Objective(sample_weights=weights))
    tol = 1e-5 if cfg.optimizer == "sgd" else 5e-4
    assert torch.allclose(batched, reference, atol=tol, rtol=0)
    assert torch.allclose(loss, ref_loss, atol=1e-5)
    (ones, ones_loss), _ = _both(spec, start, fed, ids, cfg, Objective(sample_weights=torch.ones(len(ids), n_max)))
    (plain, plain_loss), _ = _both(spec, start, fed, ids, cfg, None)
    assert torch.allclose(ones, plain, atol=tol) and torch.allclose(ones_loss, plain_loss, atol=1e-5)
    (zeros, _), _ = _both(spec, start, fed, ids, SGD, Objective(sample_weights=torch.zeros(len(ids), n_max)))
    assert torch.equal(zeros, start)
    assert not torch.allclose(batched, plain, atol=1e-3)
