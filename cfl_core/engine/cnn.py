"""The LeNet-style CNN of the CLoVE paper, batched over model copies.

28x28 inputs: conv 1->6 5x5, max-pool 2, conv 6->16 5x5, max-pool 2, linear 256->classes.
Small inputs (digits' 8x8) use 3x3 kernels with padding 1 so two poolings still
fit (8 -> 4 -> 2), giving linear 64->classes.

Convolving C different models over their own samples can be done three ways,
and which is fastest depends on the device and the sizes:
- "unfold": im2col once, then one batched matmul per layer (fast on CPU);
- "grouped": one conv2d with groups=C (fast on GPUs with cuDNN);
- "loop": one conv2d per copy (never slower than training copies one by one).
`CNN.strategy` picks one; `auto` uses the table in `preferred_strategy`, which
the benchmark (python -m cfl_core bench) measures.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .models import ModelSpec, _Sequential, _linear

STRATEGIES = ("unfold", "grouped", "loop")


def preferred_strategy(device: torch.device) -> str:
    """Measured defaults (see benchmarks/RESULTS.md): unfold+bmm on CPU, grouped conv on CUDA."""
    return "grouped" if device.type == "cuda" else "unfold"


class CNN(ModelSpec):
    name = "cnn"

    def __init__(self, input_shape, outputs, strategy: str = "auto"):
        super().__init__(input_shape, outputs)
        ch, h, w = self.input_shape
        small = min(h, w) < 16
        self.kernel = 3 if small else 5
        self.padding = 1 if small else 0
        self.strategy = strategy
        k, p = self.kernel, self.padding
        h1, w1 = (h + 2 * p - k + 1) // 2, (w + 2 * p - k + 1) // 2
        h2, w2 = (h1 + 2 * p - k + 1) // 2, (w1 + 2 * p - k + 1) // 2
        if h2 < 1 or w2 < 1:
            raise ValueError(f"input {input_shape} is too small for the CNN")
        self.flat_features = 16 * h2 * w2
        self._add("conv1.weight", (6, ch, k, k), ch * k * k)
        self._add("conv1.bias", (6,), ch * k * k)
        self._add("conv2.weight", (16, 6, k, k), 6 * k * k)
        self._add("conv2.bias", (16,), 6 * k * k)
        self._add("fc.weight", (outputs, self.flat_features), self.flat_features)
        self._add("fc.bias", (outputs,), self.flat_features)

    def activation_floats(self) -> int:
        ch, h, w = self.input_shape
        k, p = self.kernel, self.padding
        h0, w0 = h + 2 * p - k + 1, w + 2 * p - k + 1
        h1, w1 = h0 // 2 + 2 * p - k + 1, w0 // 2 + 2 * p - k + 1
        # im2col columns and conv outputs of both layers, kept for the backward pass
        return 3 * (ch * k * k * h0 * w0 + 6 * h0 * w0 + 6 * k * k * h1 * w1 + 16 * h1 * w1)

    def resolved_strategy(self, device: torch.device) -> str:
        return preferred_strategy(device) if self.strategy == "auto" else self.strategy

    def apply(self, p, x):
        copies, batch = x.shape[:2]
        conv = {"unfold": self._conv_unfold, "grouped": self._conv_grouped, "loop": self._conv_loop}[
            self.resolved_strategy(x.device)
        ]
        h = x
        for layer in ("conv1", "conv2"):
            h = conv(h, p[f"{layer}.weight"], p[f"{layer}.bias"])
            h = F.max_pool2d(torch.relu(h).flatten(0, 1), 2)
            h = h.view(copies, batch, *h.shape[1:])
        return _linear(h.flatten(2), p["fc.weight"], p["fc.bias"])

    # Each conv maps x [C, B, ch, H, W] with weight [C, out, ch, k, k] to [C, B, out, H', W'].
    def _conv_unfold(self, x, weight, bias):
        copies, batch, ch, height, width = x.shape
        k, pad = self.kernel, self.padding
        out_h, out_w = height + 2 * pad - k + 1, width + 2 * pad - k + 1
        cols = F.unfold(x.reshape(copies * batch, ch, height, width), k, padding=pad)  # [C*B, ch*k*k, L]
        cols = cols.view(copies, batch, ch * k * k, out_h * out_w).transpose(1, 2)  # [C, ch*k*k, B, L]
        out = torch.bmm(weight.reshape(copies, weight.shape[1], -1), cols.reshape(copies, ch * k * k, -1))
        out = out + bias[:, :, None]
        return out.view(copies, -1, batch, out_h, out_w).transpose(1, 2)

    def _conv_grouped(self, x, weight, bias):
        copies, batch, ch, height, width = x.shape
        stacked = x.transpose(0, 1).reshape(batch, copies * ch, height, width)
        out = F.conv2d(stacked, weight.reshape(-1, ch, self.kernel, self.kernel), bias.reshape(-1),
                       padding=self.padding, groups=copies)
        return out.view(batch, copies, -1, *out.shape[2:]).transpose(0, 1)

    def _conv_loop(self, x, weight, bias):
        return torch.stack(
            [F.conv2d(x[c], weight[c], bias[c], padding=self.padding) for c in range(x.shape[0])]
        )

    def reference_module(self):
        ch = self.input_shape[0]
        k, p = self.kernel, self.padding
        return _Sequential(
            conv1=nn.Conv2d(ch, 6, k, padding=p), a1=nn.ReLU(), p1=nn.MaxPool2d(2),
            conv2=nn.Conv2d(6, 16, k, padding=p), a2=nn.ReLU(), p2=nn.MaxPool2d(2),
            flat=nn.Flatten(), fc=nn.Linear(self.flat_features, self.outputs),
        )
