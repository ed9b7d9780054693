"""Floating-point operations of the engine's matmuls and convolutions, counted from the layer shapes.

Only matrix products and convolutions are counted (2 FLOPs per multiply-add);
bias adds, activations, pooling, softmax and the optimiser update are not.
For one training sample-step:

- forward: 2 x MACs of every layer;
- weight gradients: 2 x MACs of every layer (dL/dW = dL/dy^T x);
- input gradients: 2 x MACs of every layer except the first (the data needs no gradient).

So training = 3 x forward - the first layer's input gradient: a little under
the usual "3 x forward" (the MLP on digits: 2.14 x forward, since its first
layer holds most of the work). Both paths are charged the same count, for the
valid samples only (padding rows the batched path also computes are not counted).
"""
from __future__ import annotations

import math

from ..engine.models import ModelSpec


def layer_macs(spec: ModelSpec) -> list[int]:
    """Multiply-adds per sample of each matmul / convolution layer, in forward order."""
    d = math.prod(spec.input_shape)
    if spec.name in ("logreg", "linreg"):
        return [d * spec.outputs]
    if spec.name == "mlp":
        return [d * spec.hidden, spec.hidden * spec.outputs]
    if spec.name == "autoencoder":
        return [d * spec.hidden, spec.hidden * spec.code, spec.code * spec.hidden, spec.hidden * d]
    if spec.name == "cnn":
        ch, h, w = spec.input_shape
        k, p = spec.kernel, spec.padding
        h0, w0 = h + 2 * p - k + 1, w + 2 * p - k + 1
        h1, w1 = h0 // 2 + 2 * p - k + 1, w0 // 2 + 2 * p - k + 1
        return [6 * ch * k * k * h0 * w0, 16 * 6 * k * k * h1 * w1, spec.flat_features * spec.outputs]
    raise ValueError(f"no FLOP count for model family {spec.name!r}")


def forward_flops(spec: ModelSpec) -> int:
    """FLOPs of one sample's forward pass."""
    return 2 * sum(layer_macs(spec))


def train_flops(spec: ModelSpec) -> int:
    """FLOPs of one sample's forward + backward pass (see the module notes)."""
    macs = layer_macs(spec)
    return 2 * sum(macs) + 2 * sum(macs) + 2 * sum(macs[1:])
