"""The model contract every family implements (ModelSpec) and the batched layer pieces they share.

A model's parameters live in one row of a float32 tensor `[copies, D]`; each
named parameter is a view into that row with the same shape PyTorch's own
layers use (Linear weight `[out, in]`, Conv2d weight `[out, in, k, k]`). That
makes averaging, distances, cosine similarities and byte counts plain tensor
operations, and lets the sequential reference load a row into ordinary
`torch.nn` layers to check the batched maths independently.

`forward(flat [C, D], x [C, B, ...]) -> [C, B, out]`: copy c is applied to the
samples x[c]. No BatchNorm anywhere: batch statistics would couple samples and
break batching.

The families themselves are in models.py (dense ones, and the registry) and
cnn.py; both build on this module only, so neither imports the other's file
for its layers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

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
    head_layer: str | None = None  # the last layer, fed by `features` (None: no feature output)
    models_shared = 1  # models per forward_shared call in the loss matrix (1: one model at a time)

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

    def forward_shared(self, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Every model of `flat` [K, D] over the same samples `x` [1, B, ...]: outputs [K, B, out] (the loss
        matrix: each model sees a whole chunk of clients). One model at a time here; a family that shares work
        across the models (the CNN stacks their convolutions) overrides it and sets `models_shared`, the most
        models the loss matrix passes it at once."""
        return torch.cat([self.forward(flat[k : k + 1], x) for k in range(flat.shape[0])])

    # -- the penultimate layer (prototypes, feature alignment) -------------------------------------
    def features(self, p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """What the head layer reads, [C, B, F] (`apply` is `head(features)` for families with a head)."""
        raise NotImplementedError(f"{self.name} has no feature output")

    def head(self, p: dict[str, torch.Tensor], features: torch.Tensor) -> torch.Tensor:
        return batched_linear(features, p[f"{self.head_layer}.weight"], p.get(f"{self.head_layer}.bias"))

    @property
    def feature_dim(self) -> int:
        return next(s.shape[1] for s in self.slots if s.name == f"{self.head_layer}.weight")

    def layer_names(self) -> list[str]:
        """Layers in order (a slot's layer is its name before the first dot: fc1.weight -> fc1)."""
        names: list[str] = []
        for s in self.slots:
            layer = s.name.split(".")[0]
            if layer not in names:
                names.append(layer)
        return names

    def layer_mask(self, layers) -> torch.Tensor:
        """[D] bool: the parameters of these layers."""
        mask = torch.zeros(self.dim, dtype=torch.bool)
        for s in self.slots:
            if s.name.split(".")[0] in layers:
                mask[s.offset : s.offset + s.size] = True
        return mask

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


def batched_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Per-copy affine map: x [C, B, in], weight [C, out, in] -> [C, B, out].

    Computed weight-major, out^T = W x^T (+ b), and returned as a [C, B, out]
    view of that [C, out, B] result. Measured on CPU (benchmarks/RESULTS.md):
    the weight's gradient then leaves the backward pass contiguous in
    PyTorch's [out, in] layout (x W^T gave a transposed gradient that cost a
    copy per parameter per step), and the next layer reads the view without a copy.
    Without a graph (evaluation, loss matrices) there is no gradient to lay out, and
    sample-major x W^T is the faster one: the bias is copied row by row instead of
    broadcast along the samples (measured in one process, interleaved: the test
    evaluation 12% and the loss matrix about 30% faster at M = 100 and 1000).
    """
    if not torch.is_grad_enabled():
        wt = weight.transpose(1, 2)
        return torch.bmm(x, wt) if bias is None else torch.baddbmm(bias[:, None, :], x, wt)
    xt = x.transpose(1, 2)
    out = torch.bmm(weight, xt) if bias is None else torch.baddbmm(bias[:, :, None], weight, xt)
    return out.transpose(1, 2)


class NamedSequential(nn.Sequential):
    """nn.Sequential with named children and an optional flatten of the input."""

    def __init__(self, flatten: bool = False, **layers):
        super().__init__()
        self._flatten = flatten
        for name, layer in layers.items():
            self.add_module(name, layer)

    def forward(self, x):
        return super().forward(x.flatten(1) if self._flatten else x)

    def features(self, x):
        """Every layer but the last (the head): the penultimate layer's output."""
        h = x.flatten(1) if self._flatten else x
        for layer in list(self)[:-1]:
            h = layer(h)
        return h
