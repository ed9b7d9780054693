"""Applying a cluster's transform to a client's tensors."""
from __future__ import annotations

import numpy as np
import torch

STREAM_NOISE = 16


def rotate(x: torch.Tensor, degrees: float) -> torch.Tensor:
    """Counter-clockwise rotation of [N, C, H, W] images: exact for multiples of 90,
    bilinear otherwise (corners outside the original are filled with 0)."""
    if float(degrees) % 90 == 0:
        return torch.rot90(x, k=int(degrees // 90) % 4, dims=(-2, -1))
    import torchvision.transforms.functional as TF  # only needed for uneven angles

    return TF.rotate(x, float(degrees), interpolation=TF.InterpolationMode.BILINEAR)


def map_labels(y: torch.Tensor, label_map: list[int]) -> torch.Tensor:
    return torch.as_tensor(label_map, dtype=y.dtype)[y]


def linear_targets(x: torch.Tensor, theta: list[float], sigma: float, seed: int, client: int, split: int):
    """y = x . theta + N(0, sigma^2), the noise fixed by (seed, client, split)."""
    rng = np.random.default_rng([seed, STREAM_NOISE, client, split])
    noise = rng.standard_normal(len(x)) * sigma
    y = x.double().numpy() @ np.asarray(theta, dtype=np.float64) + noise
    return torch.from_numpy(y.astype(np.float32))


def apply(transform: dict, x: torch.Tensor, y: torch.Tensor, truth: dict, seed: int, client: int, split: int):
    """(x, y) as the client sees them. New tensors; the pool is never modified."""
    if "rotation" in transform:
        x = rotate(x, transform["rotation"])
    if "label_map" in transform:
        y = map_labels(y, transform["label_map"])
    if "theta" in transform:
        theta = truth["theta"][transform["theta"]]
        y = linear_targets(x, theta, truth["noise_sigma"], seed, client, split)
    return x, y
