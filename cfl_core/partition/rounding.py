"""Whole-number sample counts that add up exactly.

Client label counts must hit two totals at once: each client's size (a row)
and the cluster's label budget (a column). `fit_margins` scales a matrix of
label preferences to both totals (iterative proportional fitting, which keeps
the preferences' odds ratios), and `round_to_margins` turns it into integers
with the same row totals and, whenever the allowed cells permit, the same
column totals.
"""
from __future__ import annotations

import numpy as np


def largest_remainder(weights, total: int) -> np.ndarray:
    """Split `total` into integers proportional to `weights` (Hamilton's method)."""
    w = np.asarray(weights, dtype=np.float64)
    out = np.zeros(len(w), dtype=np.int64)
    if total <= 0:
        return out
    if w.sum() <= 0:
        raise ValueError("cannot split a positive total over zero weights")
    exact = total * w / w.sum()
    out = np.floor(exact).astype(np.int64)
    rest = int(total - out.sum())
    order = np.argsort(-(exact - out), kind="stable")
    out[order[:rest]] += 1
    return out


def fit_margins(shape: np.ndarray, rows: np.ndarray, cols: np.ndarray, iters: int = 500, tol: float = 1e-9):
    """Scale rows and columns of a non-negative matrix until its sums match
    `rows` and `cols` (as far as its zero pattern allows). Row sums are exact."""
    m = np.asarray(shape, dtype=np.float64).copy()
    rows = np.asarray(rows, dtype=np.float64)
    cols = np.asarray(cols, dtype=np.float64)

    def scale_rows(m):
        s = m.sum(1)
        return m * np.divide(rows, s, out=np.zeros_like(s), where=s > 0)[:, None]

    for _ in range(iters):
        m = scale_rows(m)
        s = m.sum(0)
        m = m * np.divide(cols, s, out=np.zeros_like(s), where=s > 0)[None, :]
        if np.abs(m.sum(1) - rows).max(initial=0.0) < tol:
            break
    return scale_rows(m)


def round_to_margins(m: np.ndarray, rows: np.ndarray, cols: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Integer matrix with row sums exactly `rows`, column sums `cols` where the
    allowed cells make that possible, and every entry near its real value."""
    n_rows, n_cols = m.shape
    out = np.floor(m + 1e-9).astype(np.int64)
    out[~allowed] = 0
    frac = np.where(allowed, m - out, -np.inf)
    row_need = np.asarray(rows, dtype=np.int64) - out.sum(1)
    col_need = np.asarray(cols, dtype=np.int64) - out.sum(0)
    # Rounding noise can overshoot a row by one: take it back from the largest cell.
    for i in np.flatnonzero(row_need < 0):
        while row_need[i] < 0:
            c = int(np.argmax(out[i]))
            out[i, c] -= 1
            row_need[i] += 1
            col_need[c] += 1
    # Greedy: cells with the largest fractional parts first, while both totals need more.
    for flat in np.argsort(-frac, axis=None, kind="stable"):
        i, c = divmod(int(flat), n_cols)
        if not allowed[i, c]:
            break  # -inf cells sort last
        if row_need[i] > 0 and col_need[c] > 0:
            out[i, c] += 1
            row_need[i] -= 1
            col_need[c] -= 1
    # Whatever is left cannot meet the column totals: keep the row sizes exact anyway.
    for i in np.flatnonzero(row_need > 0):
        choices = np.flatnonzero(allowed[i])
        want = np.where(col_need[choices] > 0, col_need[choices], 0)
        for _ in range(int(row_need[i])):
            c = choices[int(np.argmax(want))] if want.max() > 0 else choices[int(np.argmax(m[i, choices]))]
            out[i, c] += 1
            col_need[c] -= 1
            want = np.where(col_need[choices] > 0, col_need[choices], 0)
        row_need[i] = 0
    return out
