"""FEMNIST from LEAF's JSON files: 28x28 handwritten characters (62 classes), one natural client per writer.

LEAF (Caldas et al., "LEAF: A benchmark for federated settings") writes each
part of the data set as a JSON object

    {"users": [id, ...], "num_samples": [n, ...],
     "user_data": {id: {"x": [[784 floats], ...], "y": [label, ...]}, ...}}

`preprocess.sh` leaves them in `data/train/*.json` and `data/test/*.json` (a
split per writer), or, without a split, in `data/all_data/*.json`; then every
writer's samples are split here, 90% train / 10% test (LEAF's default train
fraction), in an order fixed by the writer's id. Pixel values are used as the
files store them (floats in [0, 1]); labels 0-9 are digits, 10-35 upper-case
and 36-61 lower-case letters.

The samples of all writers form the usual pools, so every partition works on
FEMNIST as on MNIST; `within=natural` instead makes one client per writer (see
partition/natural.py). There is no public mirror of the processed JSON files:
they are generated with LEAF's scripts from NIST Special Database 19, so
nothing is downloaded here.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os

import numpy as np
import torch

from .bad_file import BadDataFile
from .base import CLASSIFICATION, Dataset, DatasetInfo, DataSource, Located
from .locations import DATA_DIR_ENV, base_dirs

CLASSES = 62
PIXELS = 28 * 28
TRAIN_FRACTION = 0.9  # LEAF's default --tf, for files that come without a split
# Where LEAF's files may lie inside a base folder (the data folder of LEAF's femnist directory).
SUBDIRS = ("femnist", os.path.join("femnist", "data"), os.path.join("leaf", "data", "femnist", "data"))
# LEAF's paper: 3,550 writers and 805,263 samples; the pools below are its 90% / 10% split, rounded (an
# estimate for validation: the loaded files report what they hold). Class counts are not published.
STANDARD_INFO = DatasetInfo("femnist", CLASSIFICATION, (1, 28, 28), CLASSES, 724_737, 80_526,
                            natural_clients=3550)


def how_to_get() -> str:
    return ("generate LEAF's FEMNIST (github.com/TalwalkarLab/leaf: data/femnist/preprocess.sh, e.g. "
            "`./preprocess.sh -s niid --sf 0.05 -k 0 -t sample`) and put its data/ folder (train/ and test/, "
            f"or all_data/) at ./data/femnist or in a femnist/ folder under ${DATA_DIR_ENV}; "
            "there is no public mirror to download from")


def candidate_dirs(data_dir: str | None = None) -> list[str]:
    return [os.path.join(base, sub) for base in base_dirs(data_dir) for sub in SUBDIRS]


def _json_files(folder: str) -> list[str]:
    return sorted(glob.glob(os.path.join(folder, "*.json")))


def find_files(folder: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(train files, test files) of a LEAF data folder; test files empty for all_data/ (split here)."""
    train, test = _json_files(os.path.join(folder, "train")), _json_files(os.path.join(folder, "test"))
    if train and test:
        return tuple(train), tuple(test)
    every = _json_files(os.path.join(folder, "all_data"))
    return (tuple(every), ()) if every else None


def located(data_dir: str | None = None) -> Located:
    searched = candidate_dirs(data_dir)
    for folder in searched:
        files = find_files(folder)
        if files:
            return Located(files, folder, searched)
    return Located(None, None, searched)


def read_users(path: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{user: (x float32 [n, 784], y int64 [n])} of one LEAF JSON file, or BadDataFile naming the file and the fault.

    Every user's counts and row lengths are checked before its arrays are made, and the values after:
    finite pixels in [0, 1] (NaN pixels were accepted, and the divergence they caused was blamed on the
    learning rate) and whole-number labels 0..61."""
    def bad(problem: str) -> BadDataFile:
        return BadDataFile("femnist", path, problem, how_to_get())

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise bad(f"not JSON ({exc})") from None
    except RecursionError:
        raise bad("not JSON a LEAF file can be (nested hundreds of levels deep)") from None
    if not isinstance(data, dict) or not isinstance(data.get("users"), list) or not isinstance(data.get("user_data"), dict):
        raise bad("a LEAF file has 'users' (a list) and 'user_data' (an object)")
    users = data["users"]
    if not all(isinstance(u, str) for u in users) or len(set(users)) != len(users):
        raise bad("'users' must be a list of distinct user ids (texts)")
    counts = data.get("num_samples")
    if counts is None:
        counts = [None] * len(users)
    elif not isinstance(counts, list) or len(counts) != len(users) or not all(
            isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        raise bad(f"'num_samples' must be a list of {len(users)} sample counts, one per user")
    out = {}
    for user, declared in zip(users, counts):
        part = data["user_data"].get(user)
        if not isinstance(part, dict) or "x" not in part or "y" not in part:
            raise bad(f"user {user!r} has no x/y in 'user_data'")
        xs, ys = part["x"], part["y"]
        if not isinstance(xs, list) or not isinstance(ys, list) or len(xs) != len(ys) or \
                (declared is not None and declared != len(ys)):
            raise bad(f"user {user!r}: expected {declared} samples in lists x and y, found "
                      f"{_length(xs)} x and {_length(ys)} y")
        if not all(isinstance(row, list) and len(row) == PIXELS for row in xs):
            raise bad(f"user {user!r}: every x must be a list of {PIXELS} pixels")
        try:
            x = np.asarray(xs, dtype=np.float32).reshape(len(xs), PIXELS)
            y_values = np.asarray(ys, dtype=np.float64).reshape(len(ys))
        except (TypeError, ValueError) as exc:
            raise bad(f"user {user!r}: x/y are not numbers ({exc})") from None
        if not np.isfinite(x).all():
            raise bad(f"user {user!r}: {int((~np.isfinite(x)).sum())} pixels are not finite numbers (NaN or inf)")
        if len(y_values) and (not np.isfinite(y_values).all() or (y_values != np.round(y_values)).any()):
            raise bad(f"user {user!r}: labels must be whole numbers 0..{CLASSES - 1}")
        y = y_values.astype(np.int64)
        if len(y) and (y.min() < 0 or y.max() >= CLASSES or x.min() < 0 or x.max() > 1):
            raise bad(f"user {user!r}: labels must be 0..{CLASSES - 1} and pixels in [0, 1]")
        out[user] = (x, y)
    return out


def _length(value) -> str:
    return str(len(value)) if isinstance(value, list) else f"a {type(value).__name__}"


def _split(user: str, n: int) -> np.ndarray:
    """The train rows of a writer whose files came without a split (fixed by its id)."""
    seed = int.from_bytes(hashlib.sha256(user.encode()).digest()[:8], "little")
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[: max(1, int(round(TRAIN_FRACTION * n)))]) if n > 1 else order


def load(files: tuple[tuple[str, ...], tuple[str, ...]]) -> Dataset:
    train_files, test_files = files
    train = {u: v for f in train_files for u, v in read_users(f).items()}
    if test_files:
        test = {u: v for f in test_files for u, v in read_users(f).items()}
    else:
        test = {}
        for user, (x, y) in list(train.items()):
            keep = np.zeros(len(y), dtype=bool)
            keep[_split(user, len(y))] = True
            train[user], test[user] = (x[keep], y[keep]), (x[~keep], y[~keep])
    names = tuple(sorted(set(train) | set(test)))
    index = {u: i for i, u in enumerate(names)}

    def pool(parts):
        xs = [parts[u][0] for u in names if u in parts]
        ys = [parts[u][1] for u in names if u in parts]
        owner = [np.full(len(parts[u][1]), index[u]) for u in names if u in parts]
        if not xs:
            return np.zeros((0, PIXELS), np.float32), np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(xs), np.concatenate(ys), np.concatenate(owner)

    (x_tr, y_tr, o_tr), (x_te, y_te, o_te) = pool(train), pool(test)
    info = DatasetInfo("femnist", CLASSIFICATION, (1, 28, 28), CLASSES, len(y_tr), len(y_te),
                       tuple(int(c) for c in np.bincount(y_tr, minlength=CLASSES)),
                       tuple(int(c) for c in np.bincount(y_te, minlength=CLASSES)), natural_clients=len(names))

    def images(x):
        return torch.from_numpy(x).view(-1, 1, 28, 28)

    return Dataset(info, images(x_tr), torch.from_numpy(y_tr), images(x_te), torch.from_numpy(y_te),
                   extras={"files": list(train_files) + list(test_files)},
                   train_owner=torch.from_numpy(o_tr), test_owner=torch.from_numpy(o_te), owner_names=names)


SOURCE = DataSource(
    name="femnist",
    description="LEAF's FEMNIST: 28x28 characters in 62 classes, one natural client per writer (JSON files)",
    info=STANDARD_INFO,
    load=lambda key, _seed: load(key),
    locate=located,
    how_to_get=how_to_get(),
    supports_unsupervised=True,
)
