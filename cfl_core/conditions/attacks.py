"""Malicious clients: a fixed share of the clients attacks for the whole run, in one of four ways.

- label-flip: trains on labels C-1-y (its training data only; its test split stays true, so the records show
  what its model does on real data);
- scale / sign-flip: sends its update (what it sends minus what it received; a gradient as it is) times
  attack_scale / times -attack_scale;
- false-losses: its loss vector is rotated by one model before it is used (sent to the server by CLoVE and the
  restarts, acted on by the client itself under IFCA's lowest-loss rule): it claims the next model's loss.
Attackers are drawn once from the seed (never among the unseen clients), listed in every round's record
(`malicious`), left out of the ARI and the headline accuracy, and never counted as a cluster of their own.
"""
from __future__ import annotations

import numpy as np
import torch

from ..engine.seeding import numpy_rng

ATTACKS = ("label-flip", "scale", "sign-flip", "false-losses")


def malicious_count(cfg) -> int:
    return int(round(cfg.malicious_share * cfg.num_clients))


def choose_malicious(cfg, eligible: np.ndarray) -> list[int]:
    """The attackers among `eligible` client ids (sorted), drawn from the seed."""
    count = min(malicious_count(cfg), len(eligible))
    if count == 0:
        return []
    return sorted(numpy_rng(cfg.seed, "conditions", "malicious").choice(eligible, size=count, replace=False).tolist())


def flip_labels(y_train: torch.Tensor, n_train: torch.Tensor, clients: list[int], num_classes: int) -> None:
    """In place: the attackers' training labels y -> C-1-y (padding rows untouched)."""
    for c in clients:
        n = int(n_train[c])
        y_train[c, :n] = (num_classes - 1) - y_train[c, :n]


def attack_updates(updates: torch.Tensor, attacker: torch.Tensor, attack: str, scale: float) -> torch.Tensor:
    """Rows of attackers (a bool mask over the rows) scaled or sign-flipped."""
    if attack not in ("scale", "sign-flip") or not bool(attacker.any()):
        return updates
    factor = scale if attack == "scale" else -scale
    out = updates.clone()
    out[attacker.to(out.device)] *= factor
    return out


def false_losses(matrix: torch.Tensor, attacker: torch.Tensor) -> torch.Tensor:
    """Attackers' loss vectors rotated by one model: each claims model k+1's loss as model k's."""
    if matrix.shape[1] < 2 or not bool(attacker.any()):
        return matrix
    out = matrix.clone()
    out[attacker] = torch.roll(matrix[attacker], shifts=1, dims=1)
    return out
