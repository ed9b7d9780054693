"""Checkpoints: the state of a run after its latest finished round, so that it can resume exactly there.

One file per run folder, `checkpoint.pt`, replaced atomically after every round
(only the latest is kept). It is written with `torch.save` of a plain dict
holding tensors and one JSON text, and read with `torch.load(weights_only=True)`:
no object is ever pickled or unpickled.

    {"format": 1, "state": "<JSON text>", "tensors": {"t0": tensor, "t1": tensor, ...}}

The JSON holds everything that is not a tensor: plain values, lists, and tagged
forms for what JSON cannot say alone (tuples, sets, dicts with non-text keys,
numpy scalars and arrays, torch/numpy random generators, and dataclasses from an
explicit allow-list, e.g. CFL's TreeNode); a tensor or array is a reference to
an entry of "tensors" (the same object twice is stored once and comes back as
one object). Anything else refuses to be saved with an error naming where it
is, so an algorithm with state this format cannot hold fails loudly (the
algorithm contract test resumes every registered algorithm).
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

FORMAT = 1


class CheckpointError(ValueError):
    """A state that cannot be saved, or a checkpoint file that cannot be read back."""


class _Packer:
    def __init__(self, classes: dict[str, type]):
        self.classes = classes
        self.tensors: dict[str, torch.Tensor] = {}
        self._memo: dict[int, dict] = {}
        self._keep: list = []  # keeps memoised objects alive so their ids are not reused while packing

    def pack(self, value, where: str):
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float):
            return value
        if isinstance(value, np.generic):
            return {"__np__": value.dtype.str, "value": value.item()}
        if isinstance(value, torch.Tensor):
            return self._array(value, where, "tensor")
        if isinstance(value, np.ndarray):
            if value.dtype.hasobject:
                raise CheckpointError(f"{where}: a numpy array of Python objects cannot be checkpointed")
            return self._array(value, where, "ndarray")
        if isinstance(value, torch.device):
            return {"__device__": str(value)}
        if isinstance(value, torch.Generator):
            return {"__generator__": self._array(value.get_state(), where, "tensor")}
        if isinstance(value, np.random.Generator):
            return {"__npgen__": self.pack(value.bit_generator.state, where)}
        if isinstance(value, list):
            return [self.pack(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, tuple):
            return {"__tuple__": [self.pack(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, (set, frozenset)):
            items = sorted(value, key=repr)
            return {"__set__": [self.pack(v, f"{where}{{}}") for v in items], "frozen": isinstance(value, frozenset)}
        if isinstance(value, dict):
            return {"__dict__": [[self.pack(k, f"{where} key"), self.pack(v, f"{where}[{k!r}]")]
                                 for k, v in value.items()]}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            name = type(value).__name__
            if self.classes.get(name) is not type(value):
                raise CheckpointError(f"{where}: a {name} cannot be checkpointed (not in the algorithm's "
                                      "state_classes allow-list)")
            return {"__dataclass__": name,
                    "fields": {f.name: self.pack(getattr(value, f.name), f"{where}.{f.name}")
                               for f in dataclasses.fields(value)}}
        raise CheckpointError(f"{where}: a {type(value).__name__} cannot be checkpointed (tensors, numpy arrays, "
                              "numbers, text, lists, tuples, sets, dicts and allow-listed dataclasses can)")

    def _array(self, value, where: str, kind: str) -> dict:
        hit = self._memo.get(id(value))
        if hit is not None:
            return hit
        key = f"t{len(self.tensors)}"
        if kind == "tensor":
            ref = {"__tensor__": key, "device": value.device.type}
            self.tensors[key] = value.detach().to("cpu").contiguous().clone()
        else:
            ref = {"__ndarray__": key, "dtype": value.dtype.str}
            self.tensors[key] = torch.from_numpy(np.ascontiguousarray(value).copy())
        self._memo[id(value)] = ref
        self._keep.append(value)
        return ref


class _Unpacker:
    def __init__(self, tensors: dict[str, torch.Tensor], classes: dict[str, type], device: torch.device):
        self.tensors = tensors
        self.classes = classes
        self.device = device
        self._memo: dict[str, Any] = {}

    def unpack(self, value):
        if isinstance(value, list):
            return [self.unpack(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "__tensor__" in value:
            key = value["__tensor__"]
            if key not in self._memo:
                t = self._tensor(key)
                self._memo[key] = t.to(self.device) if value.get("device", "cpu") != "cpu" else t
            return self._memo[key]
        if "__ndarray__" in value:
            key = value["__ndarray__"]
            if key not in self._memo:
                self._memo[key] = self._tensor(key).numpy().astype(np.dtype(value["dtype"]), copy=False)
            return self._memo[key]
        if "__np__" in value:
            return np.dtype(value["__np__"]).type(value["value"])
        if "__device__" in value:
            return self.device if value["__device__"] != "cpu" else torch.device("cpu")
        if "__generator__" in value:
            gen = torch.Generator()
            gen.set_state(self.unpack(value["__generator__"]).cpu())
            return gen
        if "__npgen__" in value:
            state = self.unpack(value["__npgen__"])
            bit = getattr(np.random, state["bit_generator"])()
            bit.state = state
            return np.random.Generator(bit)
        if "__tuple__" in value:
            return tuple(self.unpack(v) for v in value["__tuple__"])
        if "__set__" in value:
            items = [self.unpack(v) for v in value["__set__"]]
            return frozenset(items) if value.get("frozen") else set(items)
        if "__dict__" in value:
            return {self.unpack(k): self.unpack(v) for k, v in value["__dict__"]}
        if "__dataclass__" in value:
            cls = self.classes.get(value["__dataclass__"])
            if cls is None:
                raise CheckpointError(f"the checkpoint holds a {value['__dataclass__']}, which this algorithm does "
                                      "not allow")
            return cls(**{k: self.unpack(v) for k, v in value["fields"].items()})
        raise CheckpointError(f"unknown entry in the checkpoint: {sorted(value)[:3]}")

    def _tensor(self, key: str) -> torch.Tensor:
        t = self.tensors.get(key)
        if not isinstance(t, torch.Tensor):
            raise CheckpointError(f"the checkpoint lacks tensor {key}")
        return t


def _by_name(classes) -> dict[str, type]:
    return {c.__name__: c for c in classes or ()} if not isinstance(classes, dict) else classes


def pack(state: dict[str, Any], classes=()) -> tuple[Any, dict[str, torch.Tensor]]:
    """(JSON-able tree, tensors) for a dict of state; CheckpointError naming what cannot be saved.

    classes: the dataclasses the state may hold (the allow-list)."""
    packer = _Packer(_by_name(classes))
    tree = {name: packer.pack(value, name) for name, value in state.items()}
    return tree, packer.tensors


def unpack(tree, tensors: dict[str, torch.Tensor], classes=(),
           device: torch.device | str = "cpu") -> dict[str, Any]:
    """The state `pack` took apart, with tensors that were not on the CPU moved to `device`."""
    if not isinstance(tree, dict):
        raise CheckpointError("the checkpoint's state is not an object")
    unpacker = _Unpacker(tensors, _by_name(classes), torch.device(device))
    return {name: unpacker.unpack(value) for name, value in tree.items()}


def save(path: str | os.PathLike, state_tree, tensors: dict[str, torch.Tensor]) -> int:
    """Write the checkpoint atomically (a hidden temporary file, then one rename); returns its size in bytes."""
    path = Path(path)
    text = json.dumps(state_tree, separators=(",", ":"))
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, "state": text, "tensors": tensors}, buffer)
    data = buffer.getvalue()
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    return len(data)


def load(path: str | os.PathLike) -> tuple[Any, dict[str, torch.Tensor]]:
    """(state tree, tensors) of a checkpoint file; loaded with weights_only=True (never unpickles objects)."""
    path = Path(path)
    if path.is_symlink():
        raise CheckpointError(f"{path} is a symbolic link (not followed)")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:  # a torn, foreign or hostile file: refused, never executed
        raise CheckpointError(f"{path} cannot be read as a checkpoint ({type(exc).__name__})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("state"), str) \
            or not isinstance(data.get("tensors"), dict):
        raise CheckpointError(f"{path} is not a checkpoint of format {FORMAT}")
    try:
        tree = json.loads(data["state"])
    except json.JSONDecodeError:
        raise CheckpointError(f"{path}: its state is not valid JSON") from None
    return tree, data["tensors"]
