"""CIFAR-10 from the standard python-pickle batches, unpickled safely.

Pickle can run arbitrary code, so the batches are read with an Unpickler that
resolves only the three numpy names a batch needs and refuses every other
global. Only the exact file names of the batches are ever opened.
"""
from __future__ import annotations

import io
import os
import pickle

import numpy as np
import torch

from ..errors import DataUnavailable
from .bad_file import BadDataFile
from .base import CLASSIFICATION, Dataset, DatasetInfo, DataSource, Located
from .locations import DATA_DIR_ENV, base_dirs, download_dir

BATCH_DIR = "cifar-10-batches-py"
TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_BATCH = "test_batch"
IMAGE_BYTES = 3 * 32 * 32

STANDARD_INFO = DatasetInfo("cifar10", CLASSIFICATION, (3, 32, 32), 10, 50000, 10000, (5000,) * 10, (1000,) * 10)


def _allowed_globals() -> dict[tuple[str, str], object]:
    # numpy >= 2 moved numpy.core to numpy._core; old files name the former.
    reconstruct = np._core.multiarray._reconstruct if hasattr(np, "_core") else np.core.multiarray._reconstruct
    return {
        ("numpy.core.multiarray", "_reconstruct"): reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): reconstruct,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
    }


class BatchUnpickler(pickle.Unpickler):
    """Resolves exactly the numpy array machinery; every other global is refused."""

    ALLOWED = _allowed_globals()

    def find_class(self, module, name):
        try:
            return self.ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refused to load global {module}.{name}") from None


def how_to_get() -> str:
    return (
        "download cifar-10-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html and unpack it "
        f"so that {BATCH_DIR}/ lies in ./data or in the folder ${DATA_DIR_ENV} names; "
        "or, when online: python -m cfl_core datasets --download cifar10"
    )


def candidate_dirs(data_dir: str | None = None) -> list[str]:
    return [os.path.join(base, BATCH_DIR) for base in base_dirs(data_dir)]


def locate(data_dir: str | None = None) -> tuple[str | None, list[str]]:
    searched = candidate_dirs(data_dir)
    for folder in searched:
        if all(os.path.isfile(os.path.join(folder, f)) for f in TRAIN_BATCHES + [TEST_BATCH]):
            return folder, searched
    return None, searched


def located(data_dir: str | None = None) -> Located:
    """locate() as the registry asks: the batch folder is both what load reads and where it was found."""
    folder, searched = locate(data_dir)
    return Located(folder, folder, searched)


def download(data_dir: str | None = None) -> None:
    """Download and unpack the archive only (torchvision's CIFAR10 class would
    unpickle the batches with plain pickle, which we never do)."""
    from torchvision.datasets import CIFAR10
    from torchvision.datasets.utils import download_and_extract_archive

    root = download_dir(data_dir)
    try:
        download_and_extract_archive(CIFAR10.url, root, filename=CIFAR10.filename, md5=CIFAR10.tgz_md5)
    except Exception as exc:
        raise DataUnavailable("cifar10", [root], f"the download failed ({exc}); {how_to_get()}") from None


def _key(d: dict, name: str):
    # Python-2 pickles give bytes keys; files re-saved under Python 3 give str keys.
    for k in (name, name.encode()):
        if k in d:
            return d[k]
    return None


def read_batch(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 [N, 3, 32, 32], labels int64 [N]) from one batch file, or BadDataFile."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        batch = BatchUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except Exception as exc:  # UnpicklingError, EOFError, ValueError, ...: all mean "not a batch"
        raise BadDataFile("cifar10", path, f"not a CIFAR-10 batch ({exc})", how_to_get()) from None
    if not isinstance(batch, dict):
        raise BadDataFile("cifar10", path, f"holds a {type(batch).__name__}, not a dict", how_to_get())
    data, labels = _key(batch, "data"), _key(batch, "labels")
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != IMAGE_BYTES:
        found = f"{data.dtype} {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
        raise BadDataFile("cifar10", path, f"'data' must be uint8 [N, {IMAGE_BYTES}], found {found}", how_to_get())
    if not isinstance(labels, list) or not all(isinstance(v, int) and 0 <= v <= 9 for v in labels):
        raise BadDataFile("cifar10", path, "'labels' must be a list of ints in 0..9", how_to_get())
    if len(labels) != len(data):
        raise BadDataFile("cifar10", path, f"{len(labels)} labels for {len(data)} images", how_to_get())
    return data.reshape(-1, 3, 32, 32), np.asarray(labels, dtype=np.int64)


def load(folder: str) -> Dataset:
    train = [read_batch(os.path.join(folder, f)) for f in TRAIN_BATCHES]
    x_test, y_test = read_batch(os.path.join(folder, TEST_BATCH))
    x_train = np.concatenate([x for x, _ in train])
    y_train = np.concatenate([y for _, y in train])

    def images(a):
        return torch.from_numpy(a).float().div_(255.0)

    info = DatasetInfo(
        "cifar10", CLASSIFICATION, (3, 32, 32), 10, len(y_train), len(y_test),
        tuple(int(c) for c in np.bincount(y_train, minlength=10)),
        tuple(int(c) for c in np.bincount(y_test, minlength=10)),
    )
    return Dataset(info, images(x_train), torch.from_numpy(y_train), images(x_test), torch.from_numpy(y_test),
                   extras={"folder": folder})


SOURCE = DataSource(
    name="cifar10",
    description="32x32 colour images in 10 classes (python pickle batches)",
    info=STANDARD_INFO,
    load=lambda folder, _seed: load(folder),
    locate=located,
    download=download,
    how_to_get=how_to_get(),
    supports_unsupervised=True,
)
