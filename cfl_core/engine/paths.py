"""Which training path trains a run, and why: the compiled kernel (native/) or PyTorch's batched path.

The two paths agree to float tolerance, not bit for bit, so records made on one differ from the other's in
their last digits; and the thread count changes how sums are split. A run therefore records both in
meta.json and summary.json (and a sweep in results.csv), so that two labs comparing results can see why
their last digits differ.

`expected_path` says, before any training, what the engine will use for the run's plain local training;
`observed_path` says what the training calls actually used (counted by `training.TRAINING_PATHS`): an
algorithm with a local objective (FedProx, Per-FedAvg, FedProto, FedALA, FedPAC), kept optimiser state
(CFL's `optimizer_state=persistent`) or gradient aggregation trains on PyTorch even where the kernel could.
"""
from __future__ import annotations

import torch

from . import native
from .training import KERNEL, TORCH


def expected_path(spec, optimizer: str, device) -> tuple[str, str]:
    """(path, reason) for plain local training of this model with this optimiser on this device here."""
    if torch.device(device).type != "cpu":
        return TORCH, f"on {torch.device(device).type}: the kernel trains on the CPU only"
    if optimizer != "sgd":
        return TORCH, f"optimizer {optimizer}: the kernel does plain SGD"
    if not native.enabled():
        return TORCH, "the kernel is turned off (CFL_NATIVE=0)"
    if native.dense_layers(spec) is None:
        return TORCH, f"the {spec.name} model: the kernel trains dense ReLU stacks under cross-entropy only"
    if native.library() is None:
        return TORCH, native.status()
    return KERNEL, f"plain SGD of a dense ReLU stack on the CPU ({native.status()})"


def observed_path(counts: dict, expected: tuple[str, str]) -> tuple[str, str]:
    """(path, reason) from the training calls counted so far; the expectation while none has been made."""
    kernel, torch_calls = counts.get(KERNEL, 0), counts.get(TORCH, 0)
    if not kernel and not torch_calls:
        return expected
    calls = f"{kernel} kernel and {torch_calls} PyTorch training calls"
    if kernel and torch_calls:
        return f"{KERNEL} and {TORCH}", (f"{calls}: plain local training on the kernel, the algorithm's own training "
                                          "(a local objective, kept optimiser state or gradient steps) on PyTorch")
    if kernel:
        return KERNEL, f"{calls}: {expected[1]}"
    if expected[0] == KERNEL:
        return TORCH, (f"{calls}: this run's training needs PyTorch (a local objective, kept optimiser state or "
                       "gradient aggregation), though the kernel could train the model")
    return TORCH, f"{calls}: {expected[1]}"
