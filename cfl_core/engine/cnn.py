"""The LeNet-style CNN of the CLoVE paper, batched over model copies.

28x28 inputs: conv 1->6 5x5, max-pool 2, conv 6->16 5x5, max-pool 2, linear 256->classes.
Small inputs (digits' 8x8) use 3x3 kernels with padding 1 so two poolings still
fit (8 -> 4 -> 2), giving linear 64->classes.

Convolving C different models over their own samples can be done three ways,
and which is fastest depends on the device and the sizes:
- "unfold": im2col once, then one batched matmul per layer (im2col is slow on CPU);
- "grouped": one conv2d with groups=C (fastest on CPU, channels-last; cuDNN on GPUs);
- "loop": one conv2d per copy (never slower than training copies one by one).
`CNN.strategy` picks one; `auto` uses the fixed per-device table `PREFERRED`,
filled from what the benchmark (python -m cfl_core bench) measures. A single
copy (loss matrix, evaluation) is always a plain convolution.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .spec import ModelSpec, NamedSequential

STRATEGIES = ("unfold", "grouped", "loop")
SLICE = 256  # samples per convolution call when one model sees a large batch
# The loss matrix's models over shared samples: at most MODELS_STACKED models' convolutions stacked into one, in
# slices of STACKED_SAMPLES // K samples (at least 32). Measured on the quiet 2-core EPYC, 4,000 28x28 samples
# (benchmarks/RESULTS.md, "The paper-size CNN round, measured"): per model, K = 1 at 256 samples ~73 ms, K = 4
# stacked at 64-128 ~35-38 ms, K = 8 at 64 ~22 ms; slices past ~1,000 samples x K fell out of cache (2-10x slower).
MODELS_STACKED = 8
STACKED_SAMPLES = 512


# The fixed table `auto` uses, per device type, filled from the benchmark's strategy rows
# (benchmarks/RESULTS.md). CPU (2-core EPYC, torch 2.14, M=100, one round): grouped channels-last
# ~1.0 ms per client-step, loop ~1.8, unfold ~7, the sequential reference ~6.4. CUDA: grouped
# (cuDNN's grouped convolution), not yet measured here.
PREFERRED = {"cpu": "grouped", "cuda": "grouped"}


def preferred_strategy(device: torch.device) -> str:
    """The measured fastest strategy for this device type (grouped where not measured)."""
    return PREFERRED.get(device.type, "grouped")


class CNN(ModelSpec):
    name = "cnn"
    head_layer = "fc"

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

    models_shared = MODELS_STACKED

    def forward_shared(self, flat, x):
        """Every model over the same samples x [1, B, ch, H, W] (the loss matrix): the models' first convolutions
        stacked into one of K*6 output channels on the shared input, the second grouped by model. One model's
        1->6-channel convolution and its 6-channel pooling use the CPU poorly (measured: each ~30% of the
        paper-size round); K models' 24 channels run ~2.5x faster per model. The same values as K single-model
        passes (the same per-channel sums)."""
        copies = flat.shape[0]
        if copies == 1:
            return self.forward(flat, x)
        p = self.views(flat)
        step = max(32, STACKED_SAMPLES // copies)
        parts = [self._stacked_features(p, x[0, lo : lo + step]) for lo in range(0, x.shape[1], step)]
        features = (parts[0] if len(parts) == 1 else torch.cat(parts)).transpose(0, 1)
        return self.head(p, features)

    def _stacked_features(self, p, x):
        """K models' features [B, K, F] of the same samples x [B, ch, H, W]."""
        copies = p["conv1.weight"].shape[0]
        weight = p["conv1.weight"]
        h = self._block(self._layout(x), weight.reshape(-1, *weight.shape[2:]), p["conv1.bias"].reshape(-1))
        weight = p["conv2.weight"]
        h = self._block(h, weight.reshape(-1, *weight.shape[2:]), p["conv2.bias"].reshape(-1), copies)
        return h.reshape(h.shape[0], copies, -1)

    def resolved_strategy(self, device: torch.device) -> str:
        return preferred_strategy(device) if self.strategy == "auto" else self.strategy

    def apply(self, p, x):
        return self.head(p, self.features(p, x))

    def features(self, p, x):
        """The flattened output of the two conv blocks, [C, B, 16 * h2 * w2]."""
        copies = x.shape[0]
        # One copy (the loss matrix and evaluation share a model over a large batch) is a plain conv.
        strategy = "loop" if copies == 1 else self.resolved_strategy(x.device)
        if strategy == "grouped":
            features = self._features_grouped(p, x)
        elif strategy == "loop":
            features = self._features_loop(p, x)
        else:
            features = self._features_unfold(p, x)
        return features

    # Every strategy maps x [C, B, ch, H, W] to features [C, B, 16 * h2 * w2] (PyTorch's flatten order).
    # Each conv block is conv -> max-pool -> ReLU: pooling before the ReLU gives the same values and
    # the same gradients as the reference's conv -> ReLU -> pool (max and ReLU commute; where the
    # window's max is <= 0 both pass no gradient) and applies the ReLU to a quarter of the values.
    # On the CPU the conv blocks run channels-last: oneDNN's convolutions and PyTorch's max-pool are
    # both much faster in that layout (measured: max-pool forward ~10x, the conv blocks ~2x).
    @staticmethod
    def _layout(h: torch.Tensor) -> torch.Tensor:
        return h.contiguous(memory_format=torch.channels_last) if h.device.type == "cpu" else h

    def _block(self, h, weight, bias, groups=1):
        # A one-channel input is ambiguous about its layout and oneDNN then returns NCHW;
        # _layout makes the pooling input channels-last either way (a no-op when it already is).
        h = self._layout(F.conv2d(h, weight, bias, padding=self.padding, groups=groups))
        return torch.relu(F.max_pool2d(h, 2))

    def _features_grouped(self, p, x):
        """One conv2d with groups=C over the copies' channels stacked: [B, C*ch, H, W]."""
        copies, batch, ch = x.shape[:3]
        h = self._layout(x.transpose(0, 1).reshape(batch, copies * ch, *x.shape[3:]))
        for layer in ("conv1", "conv2"):
            weight = p[f"{layer}.weight"]
            h = self._block(h, weight.reshape(-1, *weight.shape[2:]), p[f"{layer}.bias"].reshape(-1), copies)
        return h.reshape(batch, copies, -1).transpose(0, 1)

    def _features_loop(self, p, x):
        """One conv2d per copy (a single copy: exactly the reference's convolution).

        A large batch (one model over many clients' samples) is convolved in slices of
        SLICE samples: on the CPU a batch past ~512 28x28 images falls out of cache and
        the same convolutions ran 1.6-2x slower (measured).
        """
        outs = []
        for c in range(x.shape[0]):
            parts = []
            for lo in range(0, x.shape[1], SLICE):
                h = self._layout(x[c, lo : lo + SLICE])
                for layer in ("conv1", "conv2"):
                    h = self._block(h, p[f"{layer}.weight"][c], p[f"{layer}.bias"][c])
                parts.append(h.reshape(h.shape[0], -1))
            outs.append(parts[0] if len(parts) == 1 else torch.cat(parts))
        return torch.stack(outs)

    def _features_unfold(self, p, x):
        """im2col once per layer, then one batched matmul over the copies."""
        copies, batch = x.shape[:2]
        h = x
        for layer in ("conv1", "conv2"):
            h = self._conv_unfold(h, p[f"{layer}.weight"], p[f"{layer}.bias"])
            h = torch.relu(F.max_pool2d(h.flatten(0, 1), 2))
            h = h.view(copies, batch, *h.shape[1:])
        return h.flatten(2)

    # x [C, B, ch, H, W] with weight [C, out, ch, k, k] -> [C, B, out, H', W'].
    def _conv_unfold(self, x, weight, bias):
        copies, batch, ch, height, width = x.shape
        k, pad = self.kernel, self.padding
        out_h, out_w = height + 2 * pad - k + 1, width + 2 * pad - k + 1
        cols = F.unfold(x.reshape(copies * batch, ch, height, width), k, padding=pad)  # [C*B, ch*k*k, L]
        cols = cols.view(copies, batch, ch * k * k, out_h * out_w).transpose(1, 2)  # [C, ch*k*k, B, L]
        out = torch.bmm(weight.reshape(copies, weight.shape[1], -1), cols.reshape(copies, ch * k * k, -1))
        out = out + bias[:, :, None]
        return out.view(copies, -1, batch, out_h, out_w).transpose(1, 2)

    def reference_module(self):
        ch = self.input_shape[0]
        k, p = self.kernel, self.padding
        return NamedSequential(
            conv1=nn.Conv2d(ch, 6, k, padding=p), a1=nn.ReLU(), p1=nn.MaxPool2d(2),
            conv2=nn.Conv2d(6, 16, k, padding=p), a2=nn.ReLU(), p2=nn.MaxPool2d(2),
            flat=nn.Flatten(), fc=nn.Linear(self.flat_features, self.outputs),
        )
