"""How much memory and time a request needs here, and whether that is allowed.

The estimate counts floating-point work per round (local training, the loss
matrix, evaluation) from the model's size and the client data, and memory
tensor by tensor (`unit_memory`, in cfl_core/memory.py: the CLI's run, compare
and sweep refuse by the same figures): the padded federation (twice under a
distribution shift, which copies it), what the algorithm keeps between rounds
(its K-hat models, or one per client; CFL's parameter tree, FlexCFL's
directions) and what a round holds at its peak (the engine's bounded training
or evaluation chunk, every participant's trained parameters and update, the
loss matrix and KMeans' copies of it, CFL's similarity matrix, the new models
and the aggregation sums, the minibatch schedule, and the checkpoint being
written). The
throughput figures are calibrated on this project's 2-core CPU (a digits MLP
round and a Fashion-MNIST CNN round, both measured under load), so they err
on the slow side. Limits: $CFL_UI_MAX_MINUTES (default 20) per job, and half
of the memory available now (CPU) or 80% of the GPU's memory.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

# the memory side of the estimate lives in cfl_core (the CLI bounds its runs with it too)
from cfl_core.memory import ENGINE_BUDGET, _bytes, _spec, memory_limit, unit_memory  # noqa: F401

CPU_FLOPS = 4e9  # effective float ops per second of the batched engine, one training thread (see below)
GPU_FLOPS = 2e11
ROUND_OVERHEAD_S = {"cpu": 0.01, "cuda": 0.01}  # KMeans, bookkeeping, the record
SETUP_S = 0.5
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


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 300:  # to 5 s: whole minutes said 94 s as "2 min" (+28%)
        return f"{5 * round(s / 5):.0f} s"
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


def seconds_limit() -> float:
    try:
        return float(os.environ.get(MAX_MINUTES_ENV) or 20) * 60
    except ValueError:
        return 20 * 60.0


def unit_cost(config) -> tuple[int, int, float]:
    """(data bytes, training bytes (kept + a round's peak), seconds) of one experiment."""
    from cfl_core.algorithms import ALGORITHMS

    info, spec = _spec(config)
    mem = unit_memory(config)
    clients = config.num_clients
    n_train = config.samples_per_client * (1 + 2 * float(config.quantity_skew))
    n_test = config.partition_config().test_size
    participants = max(1, round(config.participation * clients))
    algo = ALGORITHMS.get(config.algorithm)
    k = config.models or 1
    loss_models = k if algo is not None and algo.has_loss_vectors else 0
    fwd = _forward_flops(spec)
    per_round = participants * fwd * (3 * n_train * config.local_epochs + loss_models * n_train) + clients * n_test * fwd
    device = _device(config.device)
    throughput = GPU_FLOPS if device == "cuda" else CPU_FLOPS
    seconds = config.rounds * (per_round / throughput + ROUND_OVERHEAD_S.get(device, 0.03))
    return mem["data"], mem["kept"] + mem["round"], seconds


def estimate(configs, *, parallel: bool = False) -> Estimate:
    """Estimate for one config or a job of several (sharing data where the data settings agree).

    parallel: the units advance together (lockstep), so their models are alive at once."""
    from .jobs import data_key

    configs = list(configs) if isinstance(configs, (list, tuple)) else [configs]
    data: dict = {}
    kept, peaks = [], []
    seconds = SETUP_S
    for cfg in configs:
        m = unit_memory(cfg)
        data[data_key(cfg)] = m["data"]
        kept.append(m["kept"])
        peaks.append(m["round"])
        seconds += unit_cost(cfg)[2]
    if parallel:
        # lockstep: every unit's data and state are alive together; one unit's round runs at a time
        mem = sum(data.values()) + sum(kept) + max(peaks)
    else:
        # one unit after another: a seed's data (and the next one's as it is built), one state, one round
        mem = max(data.values()) * 2 + max(kept) + max(peaks)
    device = _device(configs[0].device)
    return Estimate(int(mem), float(seconds), device, memory_limit(device), seconds_limit())
