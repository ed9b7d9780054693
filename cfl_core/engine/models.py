"""Model families: the dense ones, the registry of every family (MODEL_FAMILIES), and the losses.

Logistic and linear regression, the MLP and the autoencoder are here. The
contract they implement (ModelSpec, flat stacked parameters) and the batched
layers they share are in spec.py; the CNN has its own file (cnn.py) because
it has several batched strategies.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from .cnn import CNN
from .spec import (  # noqa: F401  (the engine and the benchmark import the contract from here too)
    CROSS_ENTROPY, RECONSTRUCTION, SQUARED_ERROR, ModelSpec, NamedSequential, batched_linear,
)


class LogisticRegression(ModelSpec):
    name = "logreg"
    dense_layers = ("fc",)
    head_layer = "fc"

    def __init__(self, input_shape, outputs):
        super().__init__(input_shape, outputs)
        d = math.prod(self.input_shape)
        self._add("fc.weight", (outputs, d), d)
        self._add("fc.bias", (outputs,), d)

    def apply(self, p, x):
        return batched_linear(x.flatten(2), p["fc.weight"], p["fc.bias"])

    def features(self, p, x):
        return x.flatten(2)  # no hidden layer: the head reads the inputs

    def reference_module(self):
        return NamedSequential(fc=nn.Linear(math.prod(self.input_shape), self.outputs), flatten=True)


class LinearRegression(ModelSpec):
    """y = x . theta, no bias, so the model is directly comparable to the true theta."""

    name = "linreg"
    loss_kind = SQUARED_ERROR

    def __init__(self, input_shape, outputs=1):
        super().__init__(input_shape, 1)
        d = math.prod(self.input_shape)
        self._add("fc.weight", (1, d), d)

    def apply(self, p, x):
        return batched_linear(x.flatten(2), p["fc.weight"], None)

    def reference_module(self):
        return NamedSequential(fc=nn.Linear(math.prod(self.input_shape), 1, bias=False), flatten=True)


class MLP(ModelSpec):
    name = "mlp"
    dense_layers = ("fc1", "fc2")
    head_layer = "fc2"

    def __init__(self, input_shape, outputs, hidden: int = 128):
        super().__init__(input_shape, outputs)
        d = math.prod(self.input_shape)
        self.hidden = hidden
        self._add("fc1.weight", (hidden, d), d)
        self._add("fc1.bias", (hidden,), d)
        self._add("fc2.weight", (outputs, hidden), hidden)
        self._add("fc2.bias", (outputs,), hidden)

    def apply(self, p, x):
        return self.head(p, self.features(p, x))

    def features(self, p, x):
        # ReLU in place on the fresh product (nothing else holds it; its backward needs only the result): out of
        # place it writes another [C, B, hidden] tensor, ~15% of a 1000-client evaluation
        return batched_linear(x.flatten(2), p["fc1.weight"], p["fc1.bias"]).relu_()

    def reference_module(self):
        d = math.prod(self.input_shape)
        return NamedSequential(
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
            h = batched_linear(h, p[f"{layer}.weight"], p[f"{layer}.bias"]).relu_()  # in place: see MLP.features
        return batched_linear(h, p["dec2.weight"], p["dec2.bias"]).sigmoid_()

    def reference_module(self):
        d = math.prod(self.input_shape)
        return NamedSequential(
            enc1=nn.Linear(d, self.hidden), a1=nn.ReLU(), enc2=nn.Linear(self.hidden, self.code), a2=nn.ReLU(),
            dec1=nn.Linear(self.code, self.hidden), a3=nn.ReLU(), dec2=nn.Linear(self.hidden, d), out=nn.Sigmoid(),
            flatten=True,
        )


# The registry: name -> family, built here from the families' own `name`s, in the order the UI lists them.
MODEL_FAMILIES: dict[str, type[ModelSpec]] = {
    cls.name: cls for cls in (LogisticRegression, MLP, CNN, LinearRegression, Autoencoder)
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
    check_model(name, input_shape, task)
    spec = MODEL_FAMILIES[name](input_shape, outputs)
    if task == "regression" and spec.loss_kind == CROSS_ENTROPY:
        # an MLP regressor: its one output under squared error (cross-entropy of a float target crashed the first
        # training step; found by the generated contract)
        spec.loss_kind = SQUARED_ERROR
    return spec


def check_model(name: str, input_shape: tuple[int, ...], task: str) -> None:
    """ConfigError naming `model` unless the family fits the data (the config's validate() calls it, so a
    mismatch is refused before any data is built)."""
    if name not in MODEL_FAMILIES:
        raise ConfigError("model", name, f"one of {sorted(MODEL_FAMILIES)}")
    if task == "regression" and name not in ("linreg", "mlp"):
        raise ConfigError("model", name, "linreg or mlp for a regression data set")
    if name == "linreg" and task != "regression":
        raise ConfigError("model", name, "linreg only for regression data (synthetic-linear)")
    if name == "cnn" and len(input_shape) != 3:
        raise ConfigError("model", name, "cnn needs image inputs; use mlp or logreg for vector data")


def per_sample_loss(kind: str, output: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Loss of every sample, shape [C, B], for the given loss kind."""
    if kind == CROSS_ENTROPY:
        # Classes on dim 1 ([C, classes, B], a free view of batched_linear's result): PyTorch's
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
    # contiguous first: logits can be a transposed view (the dense layers' weight-major layout under autograd),
    # and argmax along a strided dimension ran ~50x slower (1.3 ms for 4,080 x 10 values); the same values, so
    # the same first-maximum indices
    return (output.contiguous().argmax(-1) == y).float()
