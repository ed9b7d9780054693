"""Batchable models over flat, stacked parameters.

A model's parameters live in one row of a float32 tensor `[copies, D]`; each
named parameter is a view into that row with the same shape PyTorch's own
layers use (Linear weight `[out, in]`, Conv2d weight `[out, in, k, k]`). That
makes averaging, distances, cosine similarities and byte counts plain tensor
operations, and lets the sequential reference load a row into ordinary
`torch.nn` layers to check the batched maths independently.

`forward(flat [C, D], x [C, B, ...]) -> [C, B, out]`: copy c is applied to the
samples x[c]. No BatchNorm anywhere: batch statistics would couple samples and
break batching.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from .dense_grads import dense_cross_entropy_grads
from .seeding import torch_generator

CROSS_ENTROPY = "cross-entropy"
SQUARED_ERROR = "squared-error"
RECONSTRUCTION = "reconstruction"


@dataclass(frozen=True)
class ParamSlot:
    name: str
    shape: tuple[int, ...]
    offset: int
    fan_in: int

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class ModelSpec:
    """Shape, initialisation and batched forward of one model family."""

    name = "model"
    loss_kind = CROSS_ENTROPY
    dense_layers: tuple[str, ...] = ()  # a dense ReLU stack, in order: gradients by hand (dense_grads.py)

    def __init__(self, input_shape: tuple[int, ...], outputs: int):
        self.input_shape = tuple(input_shape)
        self.outputs = outputs
        self.slots: list[ParamSlot] = []
        self.dim = 0

    # -- layout -----------------------------------------------------------
    def _add(self, name: str, shape: tuple[int, ...], fan_in: int) -> None:
        slot = ParamSlot(name, tuple(shape), self.dim, fan_in)
        self.slots.append(slot)
        self.dim += slot.size

    def views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named views `[C, *shape]` into a flat `[C, D]` tensor (no copy)."""
        copies = flat.shape[0]
        return {
            s.name: flat[:, s.offset : s.offset + s.size].view(copies, *s.shape) for s in self.slots
        }

    @property
    def bytes_per_model(self) -> int:
        return self.dim * 4

    # -- initialisation ----------------------------------------------------
    def init(self, *seed_parts) -> torch.Tensor:
        """One model `[D]`, drawn like PyTorch's default layer init (uniform, bound 1/sqrt(fan_in))."""
        gen = torch_generator("init", *seed_parts)
        flat = torch.empty(self.dim)
        for s in self.slots:
            bound = 1.0 / math.sqrt(s.fan_in)
            flat[s.offset : s.offset + s.size].uniform_(-bound, bound, generator=gen)
        return flat

    # -- maths -------------------------------------------------------------
    def forward(self, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.apply(self.views(flat), x)

    def apply(self, p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """The maths, on named per-copy parameters `[C, *shape]` and samples `[C, B, ...]`."""
        raise NotImplementedError

    def reference_module(self) -> nn.Module:
        """Plain torch.nn layers with this layout, for the sequential reference."""
        raise NotImplementedError

    def load_into(self, module: nn.Module, row: torch.Tensor) -> None:
        params = dict(module.named_parameters())
        with torch.no_grad():
            for s in self.slots:
                params[s.name].copy_(row[s.offset : s.offset + s.size].view(s.shape))

    def flatten_module(self, module: nn.Module) -> torch.Tensor:
        params = dict(module.named_parameters())
        return torch.cat([params[s.name].detach().reshape(-1) for s in self.slots])

    def loss_and_grads(self, p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, valid: torch.Tensor,
                       accumulate: list[torch.Tensor] | None = None, beta: float = 0.0
                       ) -> tuple[torch.Tensor, list[torch.Tensor]] | None:
        """Mean loss per copy over its valid samples and its gradients (slot order), without autograd.

        With `accumulate` (one [C, *shape] tensor per slot) each gradient g is added in place as
        beta * acc + g and the accumulators are returned. None where this model has no
        hand-written backward; training then uses autograd.
        """
        if self.loss_kind == CROSS_ENTROPY and self.dense_layers:
            layers = [(p[f"{name}.weight"], p[f"{name}.bias"]) for name in self.dense_layers]
            return dense_cross_entropy_grads(layers, x, y, valid, accumulate, beta)
        return None

    def activation_floats(self) -> int:
        """Rough count of floats one sample keeps alive in a forward+backward (for chunking)."""
        return 4 * (math.prod(self.input_shape) + self.outputs + self.dim // max(1, self.outputs))

    def describe(self) -> str:
        return f"{self.name} ({self.dim:,} parameters)"


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Per-copy affine map: x [C, B, in], weight [C, out, in] -> [C, B, out].

    Computed weight-major, out^T = W x^T (+ b), and returned as a [C, B, out]
    view of that [C, out, B] result. Measured on CPU (benchmarks/RESULTS.md):
    the weight's gradient then leaves the backward pass contiguous in
    PyTorch's [out, in] layout (x W^T gave a transposed gradient that cost a
    copy per parameter per step), and the next layer reads the view without a copy.
    """
    xt = x.transpose(1, 2)
    out = torch.bmm(weight, xt) if bias is None else torch.baddbmm(bias[:, :, None], weight, xt)
    return out.transpose(1, 2)


class LogisticRegression(ModelSpec):
    name = "logreg"
    dense_layers = ("fc",)

    def __init__(self, input_shape, outputs):
        super().__init__(input_shape, outputs)
        d = math.prod(self.input_shape)
        self._add("fc.weight", (outputs, d), d)
        self._add("fc.bias", (outputs,), d)

    def apply(self, p, x):
        return _linear(x.flatten(2), p["fc.weight"], p["fc.bias"])

    def reference_module(self):
        return _Sequential(fc=nn.Linear(math.prod(self.input_shape), self.outputs), flatten=True)


class LinearRegression(ModelSpec):
    """y = x . theta, no bias, so the model is directly comparable to the true theta."""

    name = "linreg"
    loss_kind = SQUARED_ERROR

    def __init__(self, input_shape, outputs=1):
        super().__init__(input_shape, 1)
        d = math.prod(self.input_shape)
        self._add("fc.weight", (1, d), d)

    def apply(self, p, x):
        return _linear(x.flatten(2), p["fc.weight"], None)

    def reference_module(self):
        return _Sequential(fc=nn.Linear(math.prod(self.input_shape), 1, bias=False), flatten=True)


class MLP(ModelSpec):
    name = "mlp"
    dense_layers = ("fc1", "fc2")

    def __init__(self, input_shape, outputs, hidden: int = 128):
        super().__init__(input_shape, outputs)
        d = math.prod(self.input_shape)
        self.hidden = hidden
        self._add("fc1.weight", (hidden, d), d)
        self._add("fc1.bias", (hidden,), d)
        self._add("fc2.weight", (outputs, hidden), hidden)
        self._add("fc2.bias", (outputs,), hidden)

    def apply(self, p, x):
        h = torch.relu(_linear(x.flatten(2), p["fc1.weight"], p["fc1.bias"]))
        return _linear(h, p["fc2.weight"], p["fc2.bias"])

    def reference_module(self):
        d = math.prod(self.input_shape)
        return _Sequential(
            fc1=nn.Linear(d, self.hidden), act=nn.ReLU(), fc2=nn.Linear(self.hidden, self.outputs), flatten=True
        )


class Autoencoder(ModelSpec):
    """MLP autoencoder (d -> h -> z -> h -> d, sigmoid output) for unsupervised runs."""

    name = "autoencoder"
    loss_kind = RECONSTRUCTION

    def __init__(self, input_shape, outputs=0, hidden: int = 64, code: int = 16):
        super().__init__(input_shape, math.prod(input_shape))
        d = math.prod(self.input_shape)
        self.hidden, self.code = hidden, code
        for name, (o, i) in {
            "enc1": (hidden, d), "enc2": (code, hidden), "dec1": (hidden, code), "dec2": (d, hidden)
        }.items():
            self._add(f"{name}.weight", (o, i), i)
            self._add(f"{name}.bias", (o,), i)

    def apply(self, p, x):
        h = x.flatten(2)
        for layer in ("enc1", "enc2", "dec1"):
            h = torch.relu(_linear(h, p[f"{layer}.weight"], p[f"{layer}.bias"]))
        return torch.sigmoid(_linear(h, p["dec2.weight"], p["dec2.bias"]))

    def reference_module(self):
        d = math.prod(self.input_shape)
        return _Sequential(
            enc1=nn.Linear(d, self.hidden), a1=nn.ReLU(), enc2=nn.Linear(self.hidden, self.code), a2=nn.ReLU(),
            dec1=nn.Linear(self.code, self.hidden), a3=nn.ReLU(), dec2=nn.Linear(self.hidden, d), out=nn.Sigmoid(),
            flatten=True,
        )


class _Sequential(nn.Sequential):
    """nn.Sequential with named children and an optional flatten of the input."""

    def __init__(self, flatten: bool = False, **layers):
        super().__init__()
        self._flatten = flatten
        for name, layer in layers.items():
            self.add_module(name, layer)

    def forward(self, x):
        return super().forward(x.flatten(1) if self._flatten else x)


from .cnn import CNN  # noqa: E402  (the CNN has its own file: it has several batched strategies)

MODEL_FAMILIES = {
    "logreg": LogisticRegression,
    "mlp": MLP,
    "cnn": CNN,
    "linreg": LinearRegression,
    "autoencoder": Autoencoder,
}


def default_model(task: str, input_shape: tuple[int, ...], unsupervised: bool = False) -> str:
    """The family a data set trains with unless the user picks another."""
    if unsupervised:
        return "autoencoder"
    if task == "regression":
        return "linreg"
    if len(input_shape) == 3 and input_shape[1] >= 16:
        return "cnn"  # 28x28 and 32x32 images: the CLoVE paper's LeNet-style CNN
    return "mlp"  # digits (8x8) and vector data train fast and well with the MLP


def build_model(name: str, input_shape: tuple[int, ...], outputs: int, task: str) -> ModelSpec:
    if name not in MODEL_FAMILIES:
        raise ConfigError("model", name, f"one of {sorted(MODEL_FAMILIES)}")
    if task == "regression" and name not in ("linreg", "mlp"):
        raise ConfigError("model", name, "linreg or mlp for a regression data set")
    if name == "linreg" and task != "regression":
        raise ConfigError("model", name, "linreg only for regression data (synthetic-linear)")
    if name == "cnn" and len(input_shape) != 3:
        raise ConfigError("model", name, "cnn needs image inputs; use mlp or logreg for vector data")
    return MODEL_FAMILIES[name](input_shape, outputs)


def per_sample_loss(kind: str, output: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Loss of every sample, shape [C, B], for the given loss kind."""
    if kind == CROSS_ENTROPY:
        # Classes on dim 1 ([C, classes, B], a free view of _linear's result): PyTorch's
        # log-softmax then vectorises over the samples, ~7x faster than over 10 classes.
        return F.cross_entropy(output.transpose(1, 2), y, reduction="none")
    if kind == SQUARED_ERROR:
        return (output.squeeze(-1) - y) ** 2
    if kind == RECONSTRUCTION:
        return ((output - x.flatten(2)) ** 2).mean(-1)
    raise ValueError(kind)


def per_sample_correct(kind: str, output: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
    if kind != CROSS_ENTROPY:
        return None  # regression and reconstruction have no accuracy
    return (output.argmax(-1) == y).float()
