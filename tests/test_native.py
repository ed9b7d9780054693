"""The compiled training kernel (cfl_core/engine/native) against the sequential reference and the torch path."""
import os
import subprocess
import sys

import pytest
import torch

from cfl_core.engine import native, training
from cfl_core.engine.models import build_model
from cfl_core.engine.reference import train_sequential
from cfl_core.engine.training import TrainConfig, batch_schedule, train_batched
from tests.helpers import random_federation

HAS_COMPILER = native._compiler() is not None
needs_kernel = pytest.mark.skipif(not HAS_COMPILER, reason="no C compiler on this machine: the torch path trains")


@pytest.fixture
def spy(monkeypatch):
    """Records, per train_batched call, whether the kernel trained (True) or the torch path did (False)."""
    calls = []
    real = native.train

    def recording(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(training.native, "train", recording)
    return calls


@pytest.fixture
def fresh_build(monkeypatch, tmp_path):
    """The module as in a new process, building into an empty cache; its state is put back afterwards."""
    saved = (native._library, native._tried, native._reason)
    monkeypatch.setenv("CFL_NATIVE_CACHE", str(tmp_path / "cache"))
    native._library, native._tried, native._reason = None, False, "not built yet"
    yield tmp_path / "cache"
    native._library, native._tried, native._reason = saved


def _setup(name="mlp", clients=6, sizes=(20, 60), seed=0):
    fed = random_federation(clients, (1, 8, 8), 10, seed=seed, sizes=sizes)
    spec = build_model(name, (1, 8, 8), 10, "classification")
    ids = torch.arange(clients)
    start = torch.stack([spec.init(0, i) for i in range(clients)])
    return fed, spec, ids, start


CONFIGS = [
    TrainConfig(local_epochs=2, batch_size=8, lr=0.05, momentum=0.9),
    TrainConfig(local_epochs=3, batch_size=5, lr=0.1, momentum=0.0, weight_decay=0.01),
    TrainConfig(local_epochs=1, batch_size=64, lr=0.05, momentum=0.5, weight_decay=0.001),  # batch > samples
]


@needs_kernel
def test_the_kernel_builds_here_and_says_so():
    assert native.library() is not None, native.status()
    assert native.status().startswith("compiled kernel, built with")


@needs_kernel
@pytest.mark.parametrize("name", ["mlp", "logreg"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=["momentum", "decay-no-momentum", "one-big-batch"])
@pytest.mark.parametrize("sizes", [(40, 40), (13, 60)], ids=["equal", "ragged"])
def test_the_kernel_trains_like_the_reference_and_the_torch_path(name, cfg, sizes, spy, monkeypatch):
    # ragged sizes: clients with fewer samples sit later steps out (no update, no momentum change)
    fed, spec, ids, start = _setup(name, sizes=sizes)
    sched = batch_schedule(fed.n_train, ids, seed=0, stream=2, cfg=cfg)
    kernel, kernel_loss = train_batched(spec, start, fed, ids, sched, cfg)
    assert spy == [True]
    reference, reference_loss = train_sequential(spec, start, fed, ids, sched, cfg)
    monkeypatch.setenv("CFL_NATIVE", "0")
    torch_path, torch_loss = train_batched(spec, start, fed, ids, sched, cfg)
    assert spy == [True, False]
    assert (reference - start).abs().max() > 1e-3  # training really moved the models
    assert torch.allclose(kernel, reference, atol=1e-5, rtol=0)
    assert torch.allclose(kernel, torch_path, atol=1e-5, rtol=0)
    assert torch.allclose(kernel_loss, reference_loss, atol=1e-5)
    assert torch.allclose(kernel_loss, torch_loss, atol=1e-5)


def _kernel_equals_torch_path(spec, fed, cfg, spy, monkeypatch, seed=0, stream=1, moved=1e-3):
    """Train every client of `fed` from its own start with the kernel, then with the torch path; both must agree,
    and training must have moved the models by more than `moved`."""
    ids = torch.arange(len(fed.n_train))
    start = torch.stack([spec.init(0, i) for i in range(len(ids))])
    sched = batch_schedule(fed.n_train, ids, seed=seed, stream=stream, cfg=cfg)
    kernel, kernel_loss = train_batched(spec, start, fed, ids, sched, cfg)
    monkeypatch.setenv("CFL_NATIVE", "0")
    torch_path, torch_loss = train_batched(spec, start, fed, ids, sched, cfg)
    assert spy == [True, False]
    assert (torch_path - start).abs().max() > moved
    assert torch.allclose(kernel, torch_path, atol=1e-5, rtol=0)
    assert torch.allclose(kernel_loss, torch_loss, atol=1e-5)


@needs_kernel
@pytest.mark.parametrize("clients", [1, 9, 19], ids=["one-lane", "a-group-and-one", "two-groups-and-three"])
def test_widths_and_client_counts_that_fill_no_tile_train_like_the_torch_path(clients, spy, monkeypatch):
    # The kernel holds widths rounded up to its tiles and trains eight clients abreast: 9 inputs, 7 hidden
    # units and 3 classes fill no tile, and 1, 9 or 19 clients leave lanes of a group empty
    from cfl_core.engine.models import MLP

    fed = random_federation(clients, (1, 3, 3), 3, seed=4, sizes=(5, 23))
    cfg = TrainConfig(local_epochs=2, batch_size=6, lr=0.2, momentum=0.9, weight_decay=0.01)
    _kernel_equals_torch_path(MLP((1, 3, 3), 3, hidden=7), fed, cfg, spy, monkeypatch, seed=3, stream=1, moved=1e-2)


@needs_kernel
def test_small_models_train_eight_clients_abreast_and_larger_ones_one_at_a_time():
    from cfl_core.engine.models import MLP

    assert native.abreast(build_model("mlp", (1, 8, 8), 10, "classification"), 0.9) is True
    assert native.abreast(build_model("logreg", (1, 8, 8), 10, "classification"), 0.0) is True
    assert native.abreast(MLP((1, 8, 8), 10, hidden=512), 0.9) is True  # a group's weights and momentum 2.5 MB
    assert native.abreast(build_model("mlp", (1, 28, 28), 10, "classification"), 0.0) is False  # 3.3 MB
    assert native.abreast(build_model("cnn", (1, 28, 28), 10, "classification"), 0.9) is None  # not the kernel's


@needs_kernel
@pytest.mark.parametrize("cfg", CONFIGS[:2], ids=["momentum", "decay-no-momentum"])
def test_a_larger_model_trained_one_client_at_a_time_trains_like_the_torch_path(cfg, spy, monkeypatch):
    spec = build_model("mlp", (1, 28, 28), 10, "classification")
    assert native.abreast(spec, cfg.momentum) is False
    fed = random_federation(5, (1, 28, 28), 10, seed=2, sizes=(9, 30))  # ragged: later steps sat out
    _kernel_equals_torch_path(spec, fed, cfg, spy, monkeypatch, seed=0, stream=4)


@needs_kernel
@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 28, 28)], ids=["abreast", "one-at-a-time"])
def test_the_result_does_not_depend_on_threads_or_on_how_clients_are_split(shape):
    # 41 rows: blocks of native rows (ROW_BLOCK = 16) handed to whichever thread comes free, a short last one;
    # abreast, groups of eight that the split at row 4 regroups
    fed = random_federation(41, shape, 10, seed=0, sizes=(13, 30))
    spec = build_model("mlp", shape, 10, "classification")
    ids = torch.arange(41)
    start = torch.stack([spec.init(0, i) for i in range(41)])
    cfg = CONFIGS[0]
    sched = batch_schedule(fed.n_train, ids, seed=1, stream=0, cfg=cfg)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one, one_loss = train_batched(spec, start, fed, ids, sched, cfg)
        torch.set_num_threads(3)
        three, three_loss = train_batched(spec, start, fed, ids, sched, cfg)
    finally:
        torch.set_num_threads(threads)
    first, first_loss = train_batched(spec, start[:4], fed, ids[:4], sched.rows(0, 4), cfg)
    rest, rest_loss = train_batched(spec, start[4:], fed, ids[4:], sched.rows(4, 41), cfg)
    assert torch.equal(one, three) and torch.equal(one_loss, three_loss)
    assert torch.equal(one, torch.cat([first, rest])) and torch.equal(one_loss, torch.cat([first_loss, rest_loss]))


@needs_kernel
def test_the_same_call_gives_the_same_bits_twice():
    fed, spec, ids, start = _setup()
    cfg = CONFIGS[0]
    sched = batch_schedule(fed.n_train, ids, seed=0, stream=5, cfg=cfg)
    a, la = train_batched(spec, start, fed, ids, sched, cfg)
    b, lb = train_batched(spec, start, fed, ids, sched, cfg)
    assert torch.equal(a, b) and torch.equal(la, lb)


@needs_kernel
@pytest.mark.parametrize("layout", ["rows", "one-model-expanded", "gathered-into-out"])
def test_the_kernel_reads_the_starting_rows_where_they_are_and_never_writes_them(layout, spy, monkeypatch):
    # FedAvg starts every client from a view of one model (expand: no copy of it per client); the result goes to
    # `out` or a new tensor, never into the rows read
    fed, spec, ids, start = _setup(clients=5, sizes=(13, 60))
    cfg = CONFIGS[0]
    sched = batch_schedule(fed.n_train, ids, seed=0, stream=3, cfg=cfg)
    if layout == "one-model-expanded":
        start = start[:1].expand(len(ids), -1)
    before = start.clone()
    out = torch.full((len(ids), spec.dim), float("nan")) if layout == "gathered-into-out" else None
    trained, loss = train_batched(spec, start, fed, ids, sched, cfg, out=out)
    assert spy == [True]
    assert torch.equal(start, before)
    if out is not None:
        assert trained.data_ptr() == out.data_ptr()
    monkeypatch.setenv("CFL_NATIVE", "0")
    torch_path, torch_loss = train_batched(spec, before.contiguous(), fed, ids, sched, cfg)
    assert torch.allclose(trained, torch_path, atol=1e-5, rtol=0) and torch.allclose(loss, torch_loss, atol=1e-5)


@needs_kernel
def test_starting_rows_overlapping_the_result_are_refused_not_read_while_written():
    # start = rows 1..4 of a buffer, result = rows 0..3 of it: written row c would be read as row c + 1's start
    fed, spec, ids, start = _setup(clients=4)
    cfg = CONFIGS[0]
    sched = batch_schedule(fed.n_train, ids, seed=0, stream=1, cfg=cfg)
    buffer = torch.cat([torch.zeros(1, spec.dim), start])
    before = buffer.clone()
    assert not native.reads_from(buffer[1:], buffer[:4])
    assert native.reads_from(buffer[1:], buffer[1:])  # the rows themselves: trained in place
    assert native.train(spec, buffer[:4], fed.x_train, fed.y_train, ids, sched.idx, sched.valid, 0.1, 0.9, 0.0,
                        start=buffer[1:]) is None
    assert torch.equal(buffer, before)  # refused before anything was written


def test_turned_off_the_torch_path_trains(spy, monkeypatch):
    monkeypatch.setenv("CFL_NATIVE", "0")
    fed, spec, ids, start = _setup()
    sched = batch_schedule(fed.n_train, ids, seed=0, stream=0, cfg=CONFIGS[0])
    trained, _ = train_batched(spec, start, fed, ids, sched, CONFIGS[0])
    assert spy == [False]
    assert (trained - start).abs().max() > 1e-3
    assert native.status() == "torch batched path (CFL_NATIVE=0)"


@pytest.mark.parametrize("case", ["cnn", "adam", "objective"])
def test_what_the_kernel_does_not_cover_goes_to_the_torch_path(case, spy):
    from cfl_core.engine.objective import Objective

    fed = random_federation(4, (1, 8, 8), 10)
    spec = build_model("cnn" if case == "cnn" else "mlp", (1, 8, 8), 10, "classification")
    ids = torch.arange(4)
    start = torch.stack([spec.init(0, i) for i in range(4)])
    cfg = TrainConfig(local_epochs=1, batch_size=8, optimizer="adam" if case == "adam" else "sgd", lr=0.01)
    sched = batch_schedule(fed.n_train, ids, 0, 0, cfg)
    objective = Objective(prox_mu=0.1) if case == "objective" else None
    train_batched(spec, start, fed, ids, sched, cfg, objective=objective)
    assert not any(spy)


def test_without_a_compiler_the_torch_path_trains_and_the_reason_is_given(fresh_build, spy, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    fed, spec, ids, start = _setup()
    sched = batch_schedule(fed.n_train, ids, seed=0, stream=0, cfg=CONFIGS[0])
    trained, _ = train_batched(spec, start, fed, ids, sched, CONFIGS[0])
    reference, _ = train_sequential(spec, start, fed, ids, sched, CONFIGS[0])
    assert spy == [False]
    assert torch.allclose(trained, reference, atol=1e-5, rtol=0)
    assert native.status() == "torch batched path: no C compiler found (cc, gcc or clang; or set CC)"


def test_a_compiler_that_fails_is_reported_with_its_message(fresh_build, tmp_path, monkeypatch):
    broken = tmp_path / "broken-cc"
    broken.write_text("#!/bin/sh\necho 'broken-cc: fatal error: no licence' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("CC", str(broken))
    assert native.library() is None
    assert "broken-cc: fatal error: no licence" in native.status()
    assert not list(fresh_build.glob("*.so")) and not list(fresh_build.glob("*.tmp*"))


@needs_kernel
def test_the_build_is_cached_and_reused_by_a_new_process(fresh_build):
    assert native.library() is not None
    built = list(fresh_build.glob("dense_sgd-*.so"))
    assert len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    code = "from cfl_core.engine import native; print(native.status())"
    env = {**os.environ, "CFL_NATIVE_CACHE": str(fresh_build)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr
    assert str(built[0]) in out.stdout
    assert list(fresh_build.glob("dense_sgd-*.so")) == built and built[0].stat().st_mtime_ns == stamp


@needs_kernel
def test_a_label_outside_the_classes_is_refused_not_read_past(spy):
    fed, spec, ids, start = _setup()
    fed.y_train[2, 0] = 10  # 10 classes: 0..9
    cfg = TrainConfig(local_epochs=1, batch_size=100)  # every sample in the one step
    sched = batch_schedule(fed.n_train, ids, 0, 0, cfg)
    with pytest.raises(ValueError, match="minibatch index or label is out of range"):
        native.train(spec, start.clone(), fed.x_train, fed.y_train, ids, sched.idx, sched.valid, 0.1, 0.9, 0.0)


def test_only_dense_cross_entropy_stacks_are_taken():
    shapes = {name: native.dense_layers(build_model(name, (1, 8, 8), 10, "classification"))
              for name in ("mlp", "logreg", "cnn", "autoencoder")}
    assert shapes["mlp"] == [(64, 128, 0, 8192), (128, 10, 8320, 9600)]
    assert shapes["logreg"] == [(64, 10, 0, 640)]
    assert shapes["cnn"] is None and shapes["autoencoder"] is None
    assert native.dense_layers(build_model("linreg", (10,), 1, "regression")) is None


@needs_kernel
def test_the_kernels_chunks_are_larger_and_the_torch_paths_stay_cache_sized(monkeypatch):
    from cfl_core.engine.core import Engine

    fed = random_federation(2, (1, 8, 8), 10)
    spec = build_model("mlp", (1, 8, 8), 10, "classification")
    kernel = Engine(spec, fed, TrainConfig(), 0)._train_chunk()
    torch_sized = Engine.train_param_bytes // (4 * spec.dim)
    assert kernel == Engine.kernel_param_bytes // (4 * spec.dim) > torch_sized
    assert Engine(spec, fed, TrainConfig(optimizer="adam"), 0)._train_chunk() == torch_sized
    assert Engine(spec, fed, TrainConfig(), 0)._train_chunk(kernel_may_train=False) == torch_sized
    monkeypatch.setenv("CFL_NATIVE", "0")
    assert Engine(spec, fed, TrainConfig(), 0)._train_chunk() == torch_sized


@needs_kernel
def test_a_damaged_cached_library_is_built_again(fresh_build):
    target = native._target(native._compiler(), native.FLAG_SETS[0])
    target.parent.mkdir(parents=True)
    target.write_bytes(b"not a shared library")
    assert native.library() is not None, native.status()
    assert str(target) in native.status()
    assert target.read_bytes() != b"not a shared library"
