"""How much memory and time a request needs here, and whether that is allowed.

The estimate counts floating-point work per round (local training, the loss
matrix, evaluation) from the model's size and the client data, and memory
from the padded federation plus the engine's bounded training chunk. The
throughput figures are calibrated on this project's 2-core CPU (a digits MLP
round and a Fashion-MNIST CNN round, both measured under load), so they err
on the slow side. Limits: $CFL_UI_MAX_MINUTES (default 20) per job, and half
of the memory available now (CPU) or 80% of the GPU's memory.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

CPU_FLOPS = 4e9  # effective float ops per second of the batched engine, one training thread (see below)
GPU_FLOPS = 2e11
ROUND_OVERHEAD_S = {"cpu": 0.01, "cuda": 0.01}  # KMeans, bookkeeping, the record
SETUP_S = 0.5
ENGINE_BUDGET = 768 * 2**20  # the engine's chunk budget (cfl_core.engine.core.Engine)
MAX_MINUTES_ENV = "CFL_UI_MAX_MINUTES"


@dataclass(frozen=True)
class Estimate:
    memory_bytes: int
    seconds: float
    device: str
    memory_limit: int
    seconds_limit: float

    @property
    def ok(self) -> bool:
        return self.memory_bytes <= self.memory_limit and self.seconds <= self.seconds_limit

    def describe(self) -> str:
        return f"about {_bytes(self.memory_bytes)} of memory and {_duration(self.seconds)} on {self.device}"

    def message(self) -> str | None:
        """None when allowed; otherwise one line with the estimate and the limit."""
        if self.ok:
            return None
        return (f"Too large for this machine: this request needs {self.describe()}; the limit here is "
                f"{_bytes(self.memory_limit)} and {_duration(self.seconds_limit)} per job. "
                "Use fewer clients, samples per client, rounds or local epochs.")


def _bytes(n: float) -> str:
    for unit, size in (("GB", 2**30), ("MB", 2**20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{max(n, 0) / 2**10:.0f} KB"


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _device(name: str) -> str:
    try:
        from cfl_core.engine.federation import resolve_device

        return resolve_device(name).type
    except Exception:
        return "cpu"


def _forward_flops(spec) -> float:
    flops = 2.0 * spec.dim
    if getattr(spec, "name", "") == "cnn" and hasattr(spec, "kernel"):
        ch, h, w = spec.input_shape
        k, p = spec.kernel, spec.padding
        h0, w0 = h + 2 * p - k + 1, w + 2 * p - k + 1
        h1, w1 = h0 // 2 + 2 * p - k + 1, w0 // 2 + 2 * p - k + 1
        flops += 2.0 * (ch * k * k * 6 * h0 * w0 + 6 * k * k * 16 * max(h1, 1) * max(w1, 1))
    return flops


def _spec(config):
    from cfl_core.data import dataset_info
    from cfl_core.engine.models import build_model, default_model

    info = dataset_info(config.dataset)
    family = config.model or default_model(info.task, info.input_shape, config.unsupervised)
    outputs = 1 if info.task == "regression" else info.num_classes
    return info, build_model(family, info.input_shape, outputs, info.task)


def memory_limit(device: str) -> int:
    if device == "cuda":
        try:
            import torch

            return int(torch.cuda.get_device_properties(0).total_memory * 0.8)
        except Exception:
            pass
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    return 4 * 2**30


def seconds_limit() -> float:
    try:
        return float(os.environ.get(MAX_MINUTES_ENV) or 20) * 60
    except ValueError:
        return 20 * 60.0


def unit_cost(config) -> tuple[int, int, float]:
    """(data bytes, training bytes, seconds) of one experiment."""
    from cfl_core.algorithms import ALGORITHMS

    info, spec = _spec(config)
    pcfg = config.partition_config()
    clients = config.num_clients
    n_train = config.samples_per_client * (1 + 2 * float(config.quantity_skew))  # padding to the largest client
    n_test = pcfg.test_size
    inputs = math.prod(info.input_shape)
    data = int(clients * (n_train + n_test) * (inputs + 2) * 4)
    participants = max(1, round(config.participation * clients))
    algo = ALGORITHMS.get(config.algorithm)
    k = config.models or 1
    loss_models = k if algo is not None and algo.has_loss_vectors else 0
    batch = min(config.batch_size, max(1, int(n_train)))
    train_mem = participants * 4 * (6 * spec.dim + batch * spec.activation_floats())
    models_mem = max(k, clients if algo is not None and algo.one_model_per_client else k) * spec.dim * 4 * 4
    training = int(min(train_mem, ENGINE_BUDGET) + models_mem)
    fwd = _forward_flops(spec)
    per_round = participants * fwd * (3 * n_train * config.local_epochs + loss_models * n_train) + clients * n_test * fwd
    device = _device(config.device)
    throughput = GPU_FLOPS if device == "cuda" else CPU_FLOPS
    seconds = config.rounds * (per_round / throughput + ROUND_OVERHEAD_S.get(device, 0.03))
    return data, training, seconds


def estimate(configs, *, parallel: bool = False) -> Estimate:
    """Estimate for one config or a job of several (sharing data where the data settings agree).

    parallel: the units advance together (lockstep), so their models are alive at once."""
    from .jobs import data_key

    configs = list(configs) if isinstance(configs, (list, tuple)) else [configs]
    data: dict = {}
    training = []
    seconds = SETUP_S
    for cfg in configs:
        d, t, s = unit_cost(cfg)
        data[data_key(cfg)] = d
        training.append(t)
        seconds += s
    if parallel:
        mem = sum(data.values()) + max(training) + sum(sorted(training)[:-1]) // 8
    else:
        mem = max(data.values()) * 2 + max(training)  # sequential: a seed's data at a time (plus the next)
    device = _device(configs[0].device)
    return Estimate(int(mem), float(seconds), device, memory_limit(device), seconds_limit())
