"""AG News from the common CSV files: news titles and descriptions in 4 classes, as hashed word n-grams.

`train.csv` and `test.csv` (Zhang, Zhao, LeCun's release, as torchtext and
most papers use it) have no header and three columns: the class index 1-4
(World, Sports, Business, Sci/Tech), the title and the description. Each text
(title and description joined) becomes a vector by scikit-learn's
HashingVectorizer: word unigrams and bigrams hashed into FEATURES dimensions,
counts (no alternating signs), each vector scaled to unit length. Hashing
needs no vocabulary, so the same text always gives the same vector. The
models are the vector ones (the MLP by default, logistic regression with
`--model logreg`).

The pools are held as dense float32 tensors, so the training pool is the first
POOL_PER_CLASS rows of each class in file order (16,000 of the 120,000 rows;
they are enough for thousands of clients of 60 samples) and the whole test file
(7,600 rows). Every partition for vector data works (label skews, concept shift
by label swaps, iid); feature skew needs images. Nothing is downloaded: the
CSVs are widely mirrored but none of the mirrors is the authors' own.
"""
from __future__ import annotations

import csv
import os

import numpy as np
import torch

from .bad_file import BadDataFile
from .base import CLASSIFICATION, Dataset, DatasetInfo, DataSource, Located
from .locations import DATA_DIR_ENV, base_dirs

CLASSES = 4
FEATURES = 1024
NGRAMS = (1, 2)
POOL_PER_CLASS = 4000
FILES = ("train.csv", "test.csv")
CLASS_TEXTS = tuple(str(c) for c in range(1, CLASSES + 1))
MAX_TEST_ROWS = 50_000  # the test file is read whole: AG News' holds 7,600 rows (a dense 4 KB vector each)
SUBDIRS = ("ag-news", "ag_news", "ag_news_csv")
STANDARD_INFO = DatasetInfo("ag-news", CLASSIFICATION, (FEATURES,), CLASSES, CLASSES * POOL_PER_CLASS, 7600,
                            (POOL_PER_CLASS,) * CLASSES, (1900,) * CLASSES)


def how_to_get() -> str:
    return (f"put AG News' train.csv and test.csv (class index 1-4, title, description; no header) in "
            f"./data/ag-news or in an ag-news/ folder under ${DATA_DIR_ENV} (the ag_news_csv release of "
            "Zhang, Zhao and LeCun, 2015, as torchtext distributes it); nothing is downloaded automatically")


def candidate_dirs(data_dir: str | None = None) -> list[str]:
    return [os.path.join(base, sub) for base in base_dirs(data_dir) for sub in SUBDIRS]


def located(data_dir: str | None = None) -> Located:
    searched = candidate_dirs(data_dir)
    for folder in searched:
        if all(os.path.isfile(os.path.join(folder, f)) for f in FILES):
            return Located(folder, folder, searched)
    return Located(None, None, searched)


def read_csv(path: str, per_class: int | None) -> tuple[list[str], np.ndarray]:
    """(texts, labels 0..3) of one file, keeping at most `per_class` rows of each class in file order."""
    texts, labels = [], []
    kept = np.zeros(CLASSES, dtype=np.int64)
    rows = 0
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            for number, row in enumerate(csv.reader(fh), start=1):
                if len(row) < 3 or row[0].strip() not in CLASS_TEXTS:  # "²" is a digit to isdigit(), not to int()
                    raise BadDataFile("ag-news", path, f"line {number}: expected a class index 1-{CLASSES}, a title "
                                      "and a description", how_to_get())
                label = int(row[0].strip()) - 1
                rows += 1
                if per_class is None and rows > MAX_TEST_ROWS:
                    raise BadDataFile("ag-news", path, f"more than {MAX_TEST_ROWS:,} rows (AG News' test file holds "
                                      "7,600; each row becomes a dense vector)", how_to_get())
                if per_class is not None and kept[label] >= per_class:
                    continue
                kept[label] += 1
                texts.append(" ".join(part.replace("\\n", " ") for part in row[1:]))
                labels.append(label)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise BadDataFile("ag-news", path, f"not a readable CSV file ({exc})", how_to_get()) from None
    if not labels:
        raise BadDataFile("ag-news", path, "no rows (an empty file)", how_to_get())
    return texts, np.asarray(labels, dtype=np.int64)


def vectorise(texts: list[str]) -> torch.Tensor:
    from sklearn.feature_extraction.text import HashingVectorizer

    vec = HashingVectorizer(n_features=FEATURES, ngram_range=NGRAMS, alternate_sign=False, norm="l2")
    return torch.from_numpy(vec.transform(texts).astype(np.float32).toarray())


def load(folder: str) -> Dataset:
    (train_text, y_train), (test_text, y_test) = (read_csv(os.path.join(folder, FILES[0]), POOL_PER_CLASS),
                                                  read_csv(os.path.join(folder, FILES[1]), None))
    info = DatasetInfo("ag-news", CLASSIFICATION, (FEATURES,), CLASSES, len(y_train), len(y_test),
                       tuple(int(c) for c in np.bincount(y_train, minlength=CLASSES)),
                       tuple(int(c) for c in np.bincount(y_test, minlength=CLASSES)))
    return Dataset(info, vectorise(train_text), torch.from_numpy(y_train), vectorise(test_text),
                   torch.from_numpy(y_test), extras={"folder": folder, "features": FEATURES, "ngrams": list(NGRAMS)})


SOURCE = DataSource(
    name="ag-news",
    description="AG News: news texts in 4 classes as hashed word uni- and bigrams (CSV files)",
    info=STANDARD_INFO,
    load=lambda folder, _seed: load(folder),
    locate=located,
    how_to_get=how_to_get(),
)
