"""The CUDA path: run by `benchmarks/gpu_check.sh` on a machine with a GPU.

Without a GPU these tests are skipped (marked `cuda`, so `-m "not cuda"` leaves them out), except
when CFL_REQUIRE_CUDA=1 — the GPU check sets it, so a machine without a visible GPU fails the check
instead of passing it by skipping.
"""
import os

import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from cfl_core.config import ExperimentConfig
from cfl_core.engine.models import build_model
from cfl_core.engine.reference import train_sequential
from cfl_core.engine.training import TrainConfig, batch_schedule, train_batched
from cfl_core.experiment import Experiment
from tests.helpers import random_federation

REQUIRED = os.environ.get("CFL_REQUIRE_CUDA") == "1"
# CFL_CUDA_TESTS_ON=cpu runs the same bodies on the CPU: how the check itself is tested without a GPU
DEVICE = os.environ.get("CFL_CUDA_TESTS_ON", "cuda")


def _need_cuda():
    if DEVICE == "cpu" or torch.cuda.is_available():
        return
    if REQUIRED:
        pytest.fail("CFL_REQUIRE_CUDA=1 but torch.cuda.is_available() is False: no GPU is visible to PyTorch")
    pytest.skip("no CUDA device")


pytestmark = [pytest.mark.cuda]


@pytest.mark.parametrize("family,shape", [("mlp", (1, 8, 8)), ("cnn", (1, 28, 28))])
def test_engine_on_cuda_equals_the_sequential_reference(family, shape):
    _need_cuda()
    fed = random_federation(6, shape, 10, device=DEVICE)
    spec = build_model(family, shape, 10, "classification")
    ids = torch.arange(6, device=DEVICE)
    start = torch.stack([spec.init(0, i) for i in range(6)]).to(DEVICE)
    cfg = TrainConfig(local_epochs=2, batch_size=16, lr=0.05)
    sched = batch_schedule(fed.n_train, ids, seed=0, stream=3, cfg=cfg)
    batched, batched_loss = train_batched(spec, start, fed, ids, sched, cfg)
    reference, reference_loss = train_sequential(spec, start, fed, ids, sched, cfg)
    assert batched.device.type == DEVICE
    assert (reference - start).abs().max() > 1e-3
    # TF32 and cuDNN's algorithm choice round differently from the sequential modules
    assert torch.allclose(batched, reference, atol=1e-4, rtol=0)
    assert torch.allclose(batched_loss, reference_loss, atol=1e-4)


def test_clove_on_cuda_finds_the_same_clusters_as_on_cpu():
    _need_cuda()
    base = ExperimentConfig(partition="feature-skew", algorithm="clove", models=4, rounds=10, seed=0)
    cpu, gpu = Experiment(base.replace(device="cpu")), Experiment(base.replace(device=DEVICE))
    cpu.run()
    gpu.run()
    assert gpu.meta()["device"].startswith(DEVICE)
    final_cpu, final_gpu = cpu.records[-1], gpu.records[-1]
    assert adjusted_rand_score(final_cpu.assignments, final_gpu.assignments) == 1.0
    assert final_gpu.ari == final_cpu.ari == 1.0
    assert abs(final_gpu.accuracy - final_cpu.accuracy) < 0.02


def test_a_dashboard_job_runs_on_cuda_and_says_so(tmp_path):
    _need_cuda()
    from cfl_ui.jobs import manager as M
    from cfl_ui.jobs import snapshots as S

    manager = M.JobManager(tmp_path / "runs", max_running=1)
    try:
        config = ExperimentConfig(partition="feature-skew", clusters=2, clients_per_cluster=3,
                                  samples_per_client=30, algorithm="clove", models=2, rounds=3, device="auto")
        job = manager.submit([S.UnitSpec("", config, "CLoVE")], kind="playground", owner="gpu-check")
        assert job.join(300)
        snap = manager.snapshot(job.id)
        assert snap.status == S.FINISHED
        assert snap.units[0].meta["device"].startswith(DEVICE) and DEVICE in str(snap.device).lower()
    finally:
        manager.shutdown(10)
