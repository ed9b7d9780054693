"""Differential privacy: a client-level Gaussian mechanism on what clients send, and the privacy spent.

Two channels, each with its own noise, since the algorithms send different things:
- updates (every model or gradient a client sends): the update (what it sends minus what it received; a
  gradient as it is) is clipped to L2 norm `dp_clip` and Gaussian noise of standard deviation
  `dp_noise x dp_clip` is added to each coordinate, on the client, before it leaves;
- loss vectors (CLoVE's, the restarts' shares): the client's vector of K losses is clipped to L2 norm
  `dp_loss_clip` and noise of `dp_loss_noise x dp_loss_clip` added.
Each noised release is a Gaussian mechanism with that noise multiplier on the client's whole data (client-level
adjacency: one client's data replaced or removed changes its clipped release by at most the clip). A round in
which a client sends r such releases composes r of them; a client is selected with probability q = the round's
reporting clients over the clients that could be (treated as Poisson sampling, an approximation of the fixed-size
draw); the rounds compose. The accountant is Google's `dp-accounting` (RDP, integer orders 2-256): epsilon at
`dp_delta`, after every round.

Not covered, and listed per round in `dp_unprotected`: anything else a client sends in the clear: which model
it trained (IFCA's and FeSEM's own choice of cluster is seen by the server from what it sends), prototypes,
subspaces, label counts, mixture weights. Epsilon is the spend on the noised channels only.
"""
from __future__ import annotations

import logging

import torch

from ..engine.seeding import torch_generator

ORDERS = tuple(range(2, 65)) + (80, 96, 128, 192, 256)
MIN_NOISE = 0.01  # a noise multiplier below this bounds nothing (the accountant divides by its square)


def clip_rows(rows: torch.Tensor, clip: float) -> torch.Tensor:
    """Each row scaled down to L2 norm `clip` where it is longer."""
    norms = rows.norm(dim=1, keepdim=True)
    return rows * torch.clamp(clip / norms.clamp(min=1e-12), max=1.0)


def noised(rows: torch.Tensor, clip: float, noise: float, generator: torch.Generator) -> torch.Tensor:
    """Clip each row, then add N(0, (noise x clip)^2) to every entry (drawn on the CPU: the same on every device)."""
    out = clip_rows(rows.to(torch.float32), clip)
    if noise > 0:
        draw = torch.randn(out.shape, generator=generator, dtype=torch.float32)
        out = out + (noise * clip) * draw.to(out.device)
    return out


class PrivacyLedger:
    """The noised releases so far, per round: [(noise multiplier, sampling probability, releases)]."""

    def __init__(self, events: list | None = None):
        self.events: list = [list(e) for e in (events or [])]

    def add(self, noise: float, q: float, count: int) -> None:
        if noise > 0 and count > 0:
            self.events.append([float(noise), float(min(1.0, max(0.0, q))), int(count)])

    def epsilon(self, delta: float) -> float | None:
        """Epsilon at `delta` over every release so far (None before any)."""
        if not self.events:
            return None
        logging.getLogger("absl").setLevel(logging.ERROR)  # its per-order convergence notes are not errors
        import dp_accounting
        from dp_accounting import rdp

        accountant = rdp.RdpAccountant(list(ORDERS))
        for noise, q, count in self.events:
            event = dp_accounting.GaussianDpEvent(noise)
            if q < 1.0:
                event = dp_accounting.PoissonSampledDpEvent(q, event)
            accountant.compose(event, count)
        return float(accountant.get_epsilon(delta))


def generator(seed: int, round_index: int, call: int) -> torch.Generator:
    return torch_generator(seed, "conditions", "dp", round_index, call)
