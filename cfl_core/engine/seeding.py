"""Deterministic randomness keyed by names and numbers, never by global state.

Every random draw in a run is derived from the run seed and what it is for
(model init j, round r's participants, client c's minibatches in epoch e), so a
client's batches do not depend on who else takes part or how work is chunked,
and the batched engine and the sequential reference see the same batches.
"""
from __future__ import annotations

import hashlib

import numpy as np
import torch

_MASK32 = 0xFFFFFFFF


def derive_seed(*parts) -> int:
    """A stable 63-bit seed from any mix of strings and integers."""
    text = "/".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


def numpy_rng(*parts) -> np.random.Generator:
    return np.random.default_rng(derive_seed(*parts))


def torch_generator(*parts) -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(derive_seed(*parts))
    return gen


def _mul32(x: torch.Tensor, const: int) -> torch.Tensor:
    # (x * const) mod 2^32 without int64 overflow: split the constant in 16-bit halves.
    lo, hi = const & 0xFFFF, const >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & _MASK32


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer finaliser (xorshift-multiply), applied elementwise."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def sample_keys(seed: int, stream: int, client_ids: torch.Tensor, epoch: int, n: int) -> torch.Tensor:
    """Pseudo-random int64 keys in [0, 2^32) of shape [len(client_ids), n].

    Key (c, i) depends only on (seed, stream, client id, epoch, position i).
    Sorting a client's keys gives its own permutation of its samples.
    """
    base = torch.tensor([(seed ^ (seed >> 32)) & _MASK32], dtype=torch.int64)
    base = _mix32(base ^ (stream & _MASK32))
    base = _mix32(base ^ (epoch & _MASK32))
    per_client = _mix32(base ^ (client_ids.to(torch.int64).cpu() & _MASK32))
    positions = torch.arange(n, dtype=torch.int64)
    return _mix32(per_client[:, None] ^ _mix32(positions + 0x9E3779B9)[None, :])
