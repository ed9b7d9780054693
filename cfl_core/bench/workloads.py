"""The benchmark's data: federations of any size, built directly as padded tensors.

- `digits_federation`: scikit-learn's bundled 8x8 digits (the MLP's data set).
  The training pool has 1,346 images, too few for 1,000 clients x 60 samples
  without repeats, so each client draws its samples with replacement; clients
  form `clusters` feature-skew clusters (images rotated by 0/90/180/270 degrees,
  CLoVE's rotation structure), so the clustering step sees real structure.
- `image_federation`: synthetic 28x28 greyscale images (the CNN's input size):
  ten fixed random class prototypes plus per-sample noise, squashed into (0, 1)
  and rotated per cluster.
  No download is needed, and the arithmetic is exactly that of 28x28 data.

Both are deterministic in the seed and live on the requested device.
"""
from __future__ import annotations

import numpy as np
import torch

from ..engine.federation import Federation
from ..engine.seeding import numpy_rng


def _rotated(x: np.ndarray, cluster: np.ndarray) -> np.ndarray:
    out = x.copy()
    for c in np.unique(cluster):
        sel = cluster == c
        out[sel] = np.rot90(x[sel], k=int(c) % 4, axes=(-2, -1))
    return out


def _federation(x_train, y_train, x_test, y_test, clusters, device, classes) -> Federation:
    m, n = y_train.shape
    t = y_test.shape[1]
    return Federation(
        torch.from_numpy(np.ascontiguousarray(x_train, dtype=np.float32)).to(device),
        torch.from_numpy(y_train.astype(np.int64)).to(device),
        torch.full((m,), n, dtype=torch.int64).to(device),
        torch.from_numpy(np.ascontiguousarray(x_test, dtype=np.float32)).to(device),
        torch.from_numpy(y_test.astype(np.int64)).to(device),
        torch.full((m,), t, dtype=torch.int64).to(device),
        torch.from_numpy(clusters.astype(np.int64)),
        device, "classification", classes,
    )


def digits_federation(clients: int, samples: int, test_samples: int, clusters: int, seed: int,
                      device: torch.device) -> Federation:
    from ..data.digits import load

    data = load()
    pool_x, pool_y = data.x_train.numpy(), data.y_train.numpy()  # [N, 1, 8, 8], [N]
    test_x, test_y = data.x_test.numpy(), data.y_test.numpy()
    rng = numpy_rng(seed, "bench", "digits", clients, samples)
    cluster = np.arange(clients) % clusters
    tr = rng.integers(0, len(pool_y), (clients, samples))
    te = rng.integers(0, len(test_y), (clients, test_samples))
    rot = np.repeat(cluster, samples)
    x_train = _rotated(pool_x[tr.reshape(-1)], rot).reshape(clients, samples, *pool_x.shape[1:])
    rot = np.repeat(cluster, test_samples)
    x_test = _rotated(test_x[te.reshape(-1)], rot).reshape(clients, test_samples, *pool_x.shape[1:])
    return _federation(x_train, pool_y[tr], x_test, test_y[te], cluster, device, 10)


def image_federation(clients: int, samples: int, test_samples: int, clusters: int, seed: int,
                     device: torch.device, size: int = 28) -> Federation:
    rng = numpy_rng(seed, "bench", "images", clients, samples, size)
    prototypes = rng.random((10, 1, size, size), dtype=np.float32)
    cluster = np.arange(clients) % clusters

    def draw(count):
        y = rng.integers(0, 10, (clients, count))
        noise = rng.standard_normal((clients * count, 1, size, size), dtype=np.float32) * 0.3
        # squashed into (0, 1) rather than clipped: clipping makes flat patches whose equal conv
        # outputs tie in max-pooling, where two correct implementations may route a gradient
        # differently on rounding alone (which the equality check would then have to excuse)
        x = 1 / (1 + np.exp(-4 * (prototypes[y.reshape(-1)] + noise - 0.5)))
        x = _rotated(x, np.repeat(cluster, count)).reshape(clients, count, 1, size, size)
        return x, y

    x_train, y_train = draw(samples)
    x_test, y_test = draw(test_samples)
    return _federation(x_train, y_train, x_test, y_test, cluster, device, 10)
