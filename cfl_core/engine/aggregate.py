"""The server's averaging maths: weighted and uniform means of model rows, as small pure functions.

Every algorithm averages through these, so the float operations (and their
order) are the same everywhere: scale each row by its weight, sum, divide by
the total weight clamped away from zero.
"""
from __future__ import annotations

import torch

# A group whose weights sum to zero divides by this instead (it is then reported untrained).
MIN_TOTAL = 1e-12
# Up to this many groups `add_weighted` sums with one matrix product instead of a weighted copy of the rows.
GEMM_GROUPS = 64


def weighted_mean(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Mean of `rows` [n, D] weighted by `weights` [n] -> [D]."""
    return (rows * weights[:, None]).sum(0) / weights.sum().clamp(min=MIN_TOTAL)


def uniform_mean(rows: torch.Tensor) -> torch.Tensor:
    """Plain mean of `rows` [n, D] -> [D] (every row counts the same)."""
    return rows.mean(0)


def weighted_means_by_group(rows: torch.Tensor, groups: torch.Tensor, weights: torch.Tensor
                            ) -> dict[int, torch.Tensor]:
    """{group: weighted mean of its rows} for every group present in `groups` [n], in increasing order."""
    out = {}
    for g in sorted(set(groups.tolist())):
        pos = torch.nonzero(groups == g).squeeze(1).to(rows.device)
        out[g] = weighted_mean(rows[pos], weights[pos])
    return out


def zero_sums(models: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Empty accumulators for `add_weighted`: (weighted row sums [K, D], weight totals [K])."""
    return torch.zeros_like(models), torch.zeros(models.shape[0], device=models.device)


def add_weighted(sums: torch.Tensor, totals: torch.Tensor, rows: torch.Tensor, groups: torch.Tensor,
                 weights: torch.Tensor) -> None:
    """Add w-scaled `rows` [n, D] into `sums[groups]` and `weights` into `totals[groups]` (in place).

    Callable chunk by chunk: the sums are accumulated row after row either way. Up to GEMM_GROUPS groups
    the weighting and summing are one matrix product (a [K, n] matrix holding each row's weight in its
    group's row, times the rows): no weighted copy of the rows is made, which was the most of this
    function's time (a chunk's rows are megabytes). More groups than that (a model per client) index-add.
    """
    groups = groups.to(sums.device)
    if sums.shape[0] <= GEMM_GROUPS:
        spread = torch.zeros(sums.shape[0], rows.shape[0], dtype=rows.dtype, device=rows.device)
        spread[groups, torch.arange(rows.shape[0], device=rows.device)] = weights.to(rows.dtype)
        sums.addmm_(spread, rows)
    else:
        sums.index_add_(0, groups, rows * weights[:, None])
    totals.index_add_(0, groups, weights)


def group_means(sums: torch.Tensor, totals: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean per group [K, D], whether the group had any weight [K]) from `add_weighted`'s sums."""
    return sums / totals.clamp(min=MIN_TOTAL)[:, None], totals > 0


def keep_untrained(new: torch.Tensor, previous: torch.Tensor, trained: torch.Tensor) -> torch.Tensor:
    """`new[k]` where `trained[k]`, else `previous[k]`: models nobody trained stay as they were."""
    return torch.where(trained[:, None], new, previous)


def grouped_weighted_mean(rows: torch.Tensor, groups: torch.Tensor, weights: torch.Tensor,
                          previous: torch.Tensor) -> torch.Tensor:
    """Model k becomes the weighted mean of the rows with `groups == k`; a k with no rows keeps `previous[k]`."""
    sums, totals = zero_sums(previous)
    add_weighted(sums, totals, rows, groups, weights)
    means, trained = group_means(sums, totals)
    return keep_untrained(means, previous, trained)


def trimmed_mean(rows: torch.Tensor, share: float) -> torch.Tensor:
    """Coordinate-wise trimmed mean of `rows` [n, D] -> [D]: per parameter, the values sorted, floor(share * n)
    dropped at each end, the rest averaged (SR-FCA's robust aggregation; the plain mean when nothing is left
    to average after trimming, as its authors' code falls back)."""
    n = rows.shape[0]
    lo, hi = int(share * n), int((1 - share) * n)
    if share == 0 or hi <= lo + 1:
        return rows.mean(0)
    return torch.sort(rows, dim=0).values[lo:hi].mean(0)
