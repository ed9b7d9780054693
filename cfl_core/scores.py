"""How well a round's assignment matches the true clusters: the adjusted Rand index and the normalized mutual
information (arithmetic mean of the entropies).

The definitions are scikit-learn's `adjusted_rand_score` and `normalized_mutual_info_score` (the tests compare
both on many labelings, edge cases included). They are computed here from the pairs (true cluster, label) that
occur, because every round of every run scores its clients and scikit-learn's checks of its inputs (target type,
array conversion) took about a tenth of a 100-client FedAvg round; nothing dense is built, so a run where every
client has its own cluster and model costs no more than its pairs.
"""
from __future__ import annotations

from math import log

import numpy as np


def _table(truth, labels) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(row, column, count) of every non-zero cell of the contingency table in row-major order, and the row and
    column totals."""
    truth, labels = np.asarray(truth).ravel(), np.asarray(labels).ravel()
    if truth.shape != labels.shape:
        raise ValueError(f"truth and labels differ in length: {truth.size} and {labels.size}")
    rows = np.unique(truth, return_inverse=True)[1].ravel()
    cols_of, cols = np.unique(labels, return_inverse=True)
    cols = cols.ravel()
    width = max(len(cols_of), 1)
    cells, counts = np.unique(rows.astype(np.int64) * width + cols, return_counts=True)
    return (cells // width, cells % width, counts.astype(np.int64),
            np.bincount(rows).astype(np.int64), np.bincount(cols, minlength=len(cols_of)).astype(np.int64))


def adjusted_rand(truth, labels) -> float:
    """Adjusted Rand index of `labels` against `truth` (1 = the same partition; about 0 = chance)."""
    cell_row, cell_col, counts, row_totals, col_totals = _table(truth, labels)
    n = int(counts.sum())
    squares = int((counts * counts).sum())
    # the pair confusion matrix: pairs together in both, in truth only, in labels only, in neither
    together_both = squares - n
    labels_only = int((counts * col_totals[cell_col]).sum()) - squares
    truth_only = int((counts * row_totals[cell_row]).sum()) - squares
    neither = n * n - labels_only - truth_only - squares
    if labels_only == 0 and truth_only == 0:
        return 1.0
    return 2.0 * (together_both * neither - truth_only * labels_only) / (
        (together_both + truth_only) * (truth_only + neither) + (together_both + labels_only) * (labels_only + neither))


def _entropy(totals: np.ndarray) -> float:
    p = totals[totals > 0].astype(np.float64)
    if p.size <= 1:
        return 0.0
    total = np.sum(p)
    return float(-np.sum((p / total) * (np.log(p) - log(total))))


def normalized_mutual_info(truth, labels) -> float:
    """Mutual information of `truth` and `labels` over the mean of their entropies (1 = the same partition)."""
    cell_row, cell_col, counts, row_totals, col_totals = _table(truth, labels)
    if len(row_totals) == len(col_totals) and len(row_totals) <= 1:
        return 1.0  # neither splits the data (or there is none): a perfect match
    if len(row_totals) == 1 or len(col_totals) == 1:
        return 0.0  # one side does not split: no shared information
    values = counts.astype(np.float64)
    total = float(values.sum())
    shares = values / total
    outer = row_totals[cell_row] * col_totals[cell_col]
    log_outer = -np.log(outer) + log(float(row_totals.sum())) + log(float(col_totals.sum()))
    terms = shares * (np.log(values) - log(total)) + shares * log_outer
    terms = np.where(np.abs(terms) < np.finfo(terms.dtype).eps, 0.0, terms)
    mi = float(np.clip(terms.sum(), 0.0, None))
    if mi == 0:
        return 0.0
    return mi / ((_entropy(row_totals) + _entropy(col_totals)) / 2)
