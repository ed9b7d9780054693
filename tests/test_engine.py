"""The batched engine against the sequential per-client reference (plain torch.nn + torch.optim)."""
import pytest
import torch

from cfl_core.engine.core import Engine
from cfl_core.engine.models import build_model
from cfl_core.engine.seeding import sample_keys
from cfl_core.engine.reference import reference_loss_matrix, train_sequential
from cfl_core.engine.training import TrainConfig, batch_schedule, train_batched
from tests.helpers import random_federation

CASES = [
    ("mlp", (1, 8, 8), 10, "classification"),
    ("logreg", (1, 8, 8), 10, "classification"),
    ("cnn", (1, 8, 8), 10, "classification"),
    ("cnn", (1, 28, 28), 10, "classification"),
    ("linreg", (10,), 0, "regression"),
    ("autoencoder", (1, 8, 8), 10, "classification"),
]


def _setup(name, shape, classes, task, clients=5):
    fed = random_federation(clients, shape, max(classes, 1), task=task)
    spec = build_model(name, shape, classes if classes else 1, task)
    ids = torch.arange(clients)
    start = torch.stack([spec.init(0, i) for i in range(clients)])
    return fed, spec, ids, start


@pytest.mark.parametrize("name,shape,classes,task", CASES)
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_batched_training_matches_sequential_reference(name, shape, classes, task, optimizer):
    fed, spec, ids, start = _setup(name, shape, classes, task)
    cfg = TrainConfig(local_epochs=2, batch_size=16, lr=0.05 if optimizer == "sgd" else 0.01, optimizer=optimizer)
    sched = batch_schedule(fed.n_train, ids, seed=0, stream=3, cfg=cfg)
    batched, batched_loss = train_batched(spec, start, fed, ids, sched, cfg)
    reference, reference_loss = train_sequential(spec, start, fed, ids, sched, cfg)
    moved = (reference - start).abs().max()
    assert moved > 1e-3  # training really changed the models
    # Adam divides by sqrt of tiny second moments, which magnifies float rounding.
    tol = 1e-5 if optimizer == "sgd" else 5e-4
    assert torch.allclose(batched, reference, atol=tol, rtol=0)
    assert torch.allclose(batched_loss, reference_loss, atol=1e-5)


@pytest.mark.parametrize("strategy", ["unfold", "grouped", "loop"])
def test_every_cnn_strategy_gives_the_same_models(strategy):
    fed, spec, ids, start = _setup("cnn", (1, 28, 28), 10, "classification", clients=3)
    cfg = TrainConfig(local_epochs=1, batch_size=8)
    sched = batch_schedule(fed.n_train, ids, 0, 0, cfg)
    reference, _ = train_sequential(spec, start, fed, ids, sched, cfg)
    spec.strategy = strategy
    batched, _ = train_batched(spec, start, fed, ids, sched, cfg)
    assert torch.allclose(batched, reference, atol=1e-5)


def test_a_different_seed_gives_different_models():
    fed, spec, ids, start = _setup("mlp", (1, 8, 8), 10, "classification")
    cfg = TrainConfig(batch_size=8)
    a, _ = train_batched(spec, start, fed, ids, batch_schedule(fed.n_train, ids, 0, 0, cfg), cfg)
    b, _ = train_batched(spec, start, fed, ids, batch_schedule(fed.n_train, ids, 1, 0, cfg), cfg)
    assert not torch.allclose(a, b, atol=1e-4)


def test_schedule_walks_every_sample_once_per_epoch_and_ignores_padding():
    fed = random_federation(4, (1, 8, 8), 10, sizes=(5, 33))
    ids = torch.arange(4)
    cfg = TrainConfig(local_epochs=2, batch_size=7)
    sched = batch_schedule(fed.n_train, ids, 0, 0, cfg)
    for i, n in enumerate(fed.n_train.tolist()):
        used = sched.idx[:, i][sched.valid[:, i]]
        assert used.max() < n  # never a padded row
        assert torch.equal(torch.bincount(used, minlength=n), torch.full((n,), 2))  # each sample once an epoch


def _schedule_step_by_step(n_train, ids, seed, stream, cfg):
    """The schedule's definition, one step at a time: at step s a client takes batch s mod its steps per epoch of
    its order for epoch s div its steps per epoch, while it has epochs left (the order: its sample keys sorted)."""
    n = n_train.tolist()
    n_max = max(1, max(n))
    batch = max(1, min(cfg.batch_size, n_max))
    per_epoch = [max(1, -(-k // batch)) for k in n]
    steps = cfg.local_epochs * max(per_epoch)
    idx = torch.zeros(steps, len(n), batch, dtype=torch.int64)
    valid = torch.zeros(steps, len(n), batch, dtype=torch.bool)
    for i, k in enumerate(n):
        orders = [sorted(range(k), key=lambda j: int(sample_keys(seed, stream, ids[i:i + 1], e, n_max)[0, j]))
                  for e in range(cfg.local_epochs)]
        for s in range(steps):
            epoch, first = min(s // per_epoch[i], cfg.local_epochs - 1), (s % per_epoch[i]) * batch
            for b in range(batch):
                pos = first + b
                if s < cfg.local_epochs * per_epoch[i] and pos < k:
                    idx[s, i, b], valid[s, i, b] = orders[epoch][pos], True
    return idx, valid


@pytest.mark.parametrize("sizes,epochs,batch", [((5, 33), 2, 7), ((1, 12), 3, 4), ((8, 8), 1, 20), ((0, 9), 2, 3)])
def test_the_schedule_is_its_step_by_step_definition(sizes, epochs, batch):
    n_train = torch.tensor([sizes[0], sizes[1], (sizes[0] + sizes[1]) // 2, sizes[1]])
    ids = torch.tensor([3, 0, 7, 11])
    cfg = TrainConfig(local_epochs=epochs, batch_size=batch)
    sched = batch_schedule(n_train, ids, 5, 2, cfg)
    idx, valid = _schedule_step_by_step(n_train, ids, 5, 2, cfg)
    assert torch.equal(sched.valid, valid)
    assert torch.equal(sched.idx[valid], idx[valid])  # padding positions hold some in-range row, never used
    assert int(sched.idx.max()) < max(sizes)


def test_a_clients_batches_do_not_depend_on_who_else_trains():
    fed = random_federation(6, (1, 8, 8), 10)
    cfg = TrainConfig(batch_size=8)
    everyone = batch_schedule(fed.n_train, torch.arange(6), 0, 0, cfg)
    alone = batch_schedule(fed.n_train[4:5], torch.tensor([4]), 0, 0, cfg)
    steps = alone.steps
    assert torch.equal(everyone.idx[:steps, 4][everyone.valid[:steps, 4]], alone.idx[:, 0][alone.valid[:, 0]])


def test_sample_keys_are_deterministic_and_distinct_per_client():
    ids = torch.arange(5)
    a = sample_keys(7, 1, ids, 0, 50)
    assert torch.equal(a, sample_keys(7, 1, ids, 0, 50))
    assert not torch.equal(a[0], a[1])
    assert not torch.equal(a, sample_keys(8, 1, ids, 0, 50))
    assert int(a.min()) >= 0 and int(a.max()) < 2**32



def test_sample_keys_are_the_32_bit_hash_written_out_in_plain_integers():
    # the keys decide every client's minibatches (and so every record): whatever arithmetic computes them, they
    # must stay this hash, including seeds, streams and client ids past 32 bits
    mask = 0xFFFFFFFF

    def mix(x):
        x ^= x >> 16
        x = (x * 0x7FEB352D) & mask
        x ^= x >> 15
        x = (x * 0x846CA68B) & mask
        return x ^ (x >> 16)

    def key(seed, stream, client, epoch, i):
        base = mix(mix(((seed ^ (seed >> 32)) & mask) ^ (stream & mask)) ^ (epoch & mask))
        return mix(mix(base ^ (client & mask)) ^ mix(i + 0x9E3779B9))

    ids = [0, 3, 2**33 + 7, 123456789012]
    for seed, stream, epoch in [(0, 0, 0), (7, 2, 1), (2**62 + 11, 2**35, 4)]:
        got = sample_keys(seed, stream, torch.tensor(ids), epoch, 6)
        assert got.dtype == torch.int64
        assert got.tolist() == [[key(seed, stream, c, epoch, i) for i in range(6)] for c in ids]

@pytest.mark.parametrize("name,shape,classes,task", CASES[:3] + CASES[4:5])
def test_loss_matrix_matches_per_client_per_model_loop(name, shape, classes, task):
    fed, spec, ids, start = _setup(name, shape, classes, task, clients=6)
    engine = Engine(spec, fed, TrainConfig(), seed=0, memory_budget_mb=1)  # tiny budget: forces chunking
    models = start[:3]
    assert torch.allclose(engine.loss_matrix(models, ids, uploads=False), reference_loss_matrix(spec, models, fed, ids), atol=1e-5)


def test_train_and_aggregate_is_the_weighted_mean_of_local_models():
    fed, spec, ids, start = _setup("mlp", (1, 8, 8), 10, "classification", clients=6)
    engine = Engine(spec, fed, TrainConfig(), seed=0, memory_budget_mb=1)
    models = start[:3].clone()
    owners = torch.tensor([0, 0, 1, 1, 0, 1])  # model 2 has no clients this round
    new, _ = engine.train_and_aggregate(models, ids, owners, round_index=0)
    local, _ = engine.train_without_exchange(models[owners], ids, 0)
    w = fed.n_train.float()
    for k in (0, 1):
        sel = owners == k
        expected = (local[sel] * w[sel, None]).sum(0) / w[sel].sum()
        assert torch.allclose(new[k], expected, atol=1e-6)
    assert torch.equal(new[2], models[2])  # an untrained model is left untouched


def test_gradient_averaging_takes_one_step_along_the_weighted_mean_gradient():
    fed, spec, ids, start = _setup("logreg", (1, 8, 8), 10, "classification", clients=4)
    engine = Engine(spec, fed, TrainConfig(lr=0.1), seed=0, aggregation="gradient")
    model = start[:1]
    new, _ = engine.train_and_aggregate(model, ids, torch.zeros(4, dtype=torch.int64), 0)
    p = model.clone().requires_grad_(True)
    total = 0
    for c in range(4):
        n = int(fed.n_train[c])
        out = spec.forward(p, fed.x_train[c : c + 1, :n])
        total = total + torch.nn.functional.cross_entropy(out[0], fed.y_train[c, :n], reduction="sum")
    (grad,) = torch.autograd.grad(total / fed.n_train.sum(), p)
    assert torch.allclose(new, model - 0.1 * grad, atol=1e-6)


def test_evaluate_uses_each_clients_own_model():
    fed, spec, ids, start = _setup("mlp", (1, 8, 8), 10, "classification", clients=5)
    engine = Engine(spec, fed, TrainConfig(), seed=0)
    owners = torch.tensor([0, 1, 0, 1, 1])
    few = engine.evaluate(start[:2], owners)
    many = engine.evaluate(start[:2][owners].repeat(4, 1), torch.arange(5))  # > 16 models: gathered path
    assert torch.allclose(few.loss, many.loss, atol=1e-6)
    assert torch.allclose(few.accuracy, many.accuracy)
    for c in range(5):
        n = int(fed.n_test[c])
        out = spec.forward(start[owners[c] : owners[c] + 1], fed.x_test[c : c + 1, :n])[0]
        assert abs(float((out.argmax(1) == fed.y_test[c, :n]).float().mean()) - float(few.accuracy[c])) < 1e-6


def test_evaluating_every_client_in_order_equals_evaluating_them_picked_out():
    # all clients in order read their test data as slices; any other selection gathers it: the same numbers
    fed, spec, ids, start = _setup("mlp", (1, 8, 8), 10, "classification", clients=7)
    engine = Engine(spec, fed, TrainConfig(), seed=0)
    engine.eval_samples = 2 * int(fed.x_test.shape[1])  # chunks of two clients: the slices cross chunk borders
    owners = torch.tensor([0, 1, 0, 1, 1, 0, 1])
    whole = engine.evaluate(start[:2], owners)
    order = torch.tensor([6, 3, 0, 5, 1, 4, 2])
    picked = engine.evaluate(start[:2], owners[order], order)  # other chunks: other products, rounding apart
    assert torch.allclose(whole.loss[order], picked.loss, atol=1e-6)
    assert torch.equal(whole.accuracy[order], picked.accuracy)
    some = engine.evaluate(start[:2], owners[:4], torch.arange(4))  # gathered, in the same chunks: exactly equal
    assert torch.equal(whole.loss[:4], some.loss) and torch.equal(whole.accuracy[:4], some.accuracy)


def test_accuracy_takes_the_first_of_tied_maxima_in_either_layout():
    from cfl_core.engine.models import CROSS_ENTROPY, per_sample_correct

    logits = torch.tensor([[[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]])  # ties: classes 1 and 2, then 0 and 1
    y = torch.tensor([[1, 0]])
    weight_major = logits.transpose(1, 2).contiguous().transpose(1, 2)  # the dense families' strided view
    assert per_sample_correct(CROSS_ENTROPY, logits, y).tolist() == [[1.0, 1.0]]
    assert per_sample_correct(CROSS_ENTROPY, weight_major, y).tolist() == [[1.0, 1.0]]
