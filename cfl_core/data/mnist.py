"""MNIST and Fashion-MNIST from IDX files found on this machine."""
from __future__ import annotations

import os

import numpy as np
import torch

from ..errors import DataUnavailable
from .bad_file import BadDataFile
from .base import CLASSIFICATION, Dataset, DatasetInfo, DataSource, Located
from .idx import IdxFormatError, read_idx
from .locations import DATA_DIR_ENV, base_dirs, download_dir

# Debian's `dataset-fashion-mnist` package installs here (Fashion-MNIST only).
DEBIAN_FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"

IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

# name -> (sub-folder names tried inside each base dir, torchvision dataset class name)
LAYOUTS = {
    "fashion-mnist": (["fashion-mnist", os.path.join("FashionMNIST", "raw")], "FashionMNIST"),
    "mnist": (["mnist", os.path.join("MNIST", "raw")], "MNIST"),
}

# The published pools; the loaded Dataset reports what the files actually hold.
STANDARD_INFO = {
    "fashion-mnist": DatasetInfo(
        "fashion-mnist", CLASSIFICATION, (1, 28, 28), 10, 60000, 10000,
        (6000,) * 10, (1000,) * 10,
    ),
    "mnist": DatasetInfo(
        "mnist", CLASSIFICATION, (1, 28, 28), 10, 60000, 10000,
        (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949),
        (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009),
    ),
}


def how_to_get(name: str) -> str:
    files = ", ".join(f"{f}(.gz)" for f in IDX_FILES.values())
    steps = []
    if name == "fashion-mnist":
        steps.append("apt-get install dataset-fashion-mnist")
    steps.append(f"put {files} in a folder and set {DATA_DIR_ENV} to it (or use ./data/{name})")
    steps.append(f"or, when online, download with torchvision: python -m cfl_core datasets --download {name}")
    return "; ".join(steps)


def candidate_dirs(name: str, data_dir: str | None = None) -> list[str]:
    """Every folder looked in, in order. Name-specific sub-folders come before the
    bare base folder because MNIST and Fashion-MNIST use the same file names."""
    subdirs, _ = LAYOUTS[name]
    dirs = []
    for base in base_dirs(data_dir):
        dirs.extend(os.path.join(base, sub) for sub in subdirs)
        dirs.append(base)
    if name == "fashion-mnist":
        dirs.append(DEBIAN_FASHION_MNIST_DIR)
    return dirs


def find_files(folder: str) -> dict[str, str] | None:
    """The four IDX paths in `folder` (raw preferred over .gz), or None if any is missing."""
    found = {}
    for key, stem in IDX_FILES.items():
        for candidate in (stem, stem + ".gz"):
            path = os.path.join(folder, candidate)
            if os.path.isfile(path):
                found[key] = path
                break
        else:
            return None
    return found


def locate(name: str, data_dir: str | None = None) -> tuple[dict[str, str] | None, list[str]]:
    """(paths of the first complete set of files, folders searched)."""
    searched = candidate_dirs(name, data_dir)
    for folder in searched:
        files = find_files(folder)
        if files:
            return files, searched
    return None, searched


def located(name: str, data_dir: str | None = None) -> Located:
    """locate() as the registry asks: the four paths (sorted pairs, hashable) and their folder."""
    files, searched = locate(name, data_dir)
    if files is None:
        return Located(None, None, searched)
    return Located(tuple(sorted(files.items())), os.path.dirname(files["train_images"]), searched)


def download(name: str, data_dir: str | None = None) -> None:
    """Fetch with torchvision into <download dir>/<TorchvisionName>/raw. Only on request."""
    import torchvision.datasets

    _, class_name = LAYOUTS[name]
    root = download_dir(data_dir)
    try:
        getattr(torchvision.datasets, class_name)(root=root, train=True, download=True)
    except Exception as exc:  # offline machines fail in many ways; say so in one line
        raise DataUnavailable(name, [root], f"the download failed ({exc}); {how_to_get(name)}") from None


def _read_checked(name: str, path: str, ndim: int) -> np.ndarray:
    try:
        # the expected type and shape are checked from the header, before any value is read or decompressed
        array = read_idx(path, dtype=np.uint8, ndim=ndim, tail=(28, 28) if ndim == 3 else ())
    except IdxFormatError as exc:
        raise BadDataFile(name, path, str(exc), how_to_get(name)) from None
    if array.ndim != ndim or array.dtype != np.uint8:
        raise BadDataFile(name, path, f"expected {ndim}-d unsigned bytes, found {array.ndim}-d {array.dtype}",
                          how_to_get(name))
    if ndim == 3 and array.shape[1:] != (28, 28):
        raise BadDataFile(name, path, f"expected 28x28 images, found {array.shape[1:]}", how_to_get(name))
    if ndim == 1 and array.size and array.max() > 9:
        raise BadDataFile(name, path, f"label {int(array.max())} is outside 0..9", how_to_get(name))
    return array


def load(name: str, files: dict[str, str]) -> Dataset:
    arrays = {key: _read_checked(name, path, 3 if "images" in key else 1) for key, path in files.items()}
    for split in ("train", "test"):
        n_img, n_lab = len(arrays[f"{split}_images"]), len(arrays[f"{split}_labels"])
        if n_img != n_lab:
            raise BadDataFile(name, files[f"{split}_labels"], f"{n_lab} labels for {n_img} images", how_to_get(name))

    def images(key):
        return torch.from_numpy(arrays[key]).float().div_(255.0).unsqueeze(1)

    def labels(key):
        return torch.from_numpy(arrays[key].astype(np.int64))

    y_train, y_test = labels("train_labels"), labels("test_labels")
    info = DatasetInfo(
        name, CLASSIFICATION, (1, 28, 28), 10, len(y_train), len(y_test),
        tuple(int(c) for c in torch.bincount(y_train, minlength=10)),
        tuple(int(c) for c in torch.bincount(y_test, minlength=10)),
    )
    return Dataset(info, images("train_images"), y_train, images("test_images"), y_test,
                   extras={"files": dict(files)})


def _source(name: str, description: str, **traits) -> DataSource:
    return DataSource(
        name=name,
        description=description,
        info=STANDARD_INFO[name],
        load=lambda key, _seed: load(name, dict(key)),
        locate=lambda data_dir: located(name, data_dir),
        download=lambda data_dir: download(name, data_dir),
        how_to_get=how_to_get(name),
        supports_unsupervised=True,
        **traits,
    )


# The CNN's updates on Fashion-MNIST are much larger than on digits: CFL's thresholds, measured
# in algorithms/cfl.py's docstring.
FASHION_MNIST = _source("fashion-mnist", "Zalando's 28x28 clothing images (IDX files)", cfl_eps={"cnn": (0.9, 1.9)})
MNIST = _source("mnist", "28x28 handwritten digits (IDX files)")
