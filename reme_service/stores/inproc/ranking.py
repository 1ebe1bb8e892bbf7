"""Top-k selection over score arrays: the numpy passes under every in-process search (`stores/inproc/search.py`).

One pass of row-wise dot products over the rows (`dot_rows`), `np.argpartition` for the top k (over many rows, of
the rows at or above the k-th highest block maximum only: `above_block_maxima`), then a sort of those k.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

TOP_BLOCK = 1_024  # scores per block when picking the top k of many (`above_block_maxima`)
KTH_BLOCK = 32  # values per block when finding the k-th highest of many (`kth_highest`)


def first_matching(
    ranked: NDArray[np.intp], rows: NDArray[np.intp], test: Callable[[int], bool], k: int
) -> NDArray[np.intp]:
    """The first k positions of `ranked` whose row's node matches (the filter is tested lazily, in rank order)."""
    found: list[int] = []
    row_list = rows.tolist()
    for i in ranked.tolist():
        if test(row_list[i]):
            found.append(i)
            if len(found) == k:
                break
    return np.asarray(found, dtype=np.intp)


def dot_rows(matrix: NDArray[np.float32], query: NDArray[np.float32]) -> NDArray[np.float32]:
    """Each row's dot product with `query`. Deliberately not BLAS (`matrix @ query`): OpenBLAS's threaded gemv
    spins its threads and slows 10-70x when the cores are busy (10k x 384: 0.1 ms idle, 8 ms under load), and
    single-threaded it is slower past 50k rows; `np.vecdot` is one SIMD pass bound by memory bandwidth
    (100k x 384: ~5.5 ms, idle or not). numpy < 2 has no vecdot; einsum is the same kind of loop."""
    if hasattr(np, "vecdot"):
        scores: NDArray[np.float32] = np.vecdot(matrix, query)
    else:
        scores = np.einsum("ij,j->i", matrix, query)
    return scores


def top_rows(scores: NDArray[np.float32], k: int) -> NDArray[np.intp]:
    """The indices of the k highest scores, highest first, equal scores in row order (a partition, then a sort of
    those k only). The partition takes the k *lowest* of the negated scores: numpy's introselect asked for the
    k highest directly (`kth = n - k`) slows ~16x when most scores are equal (10k scores of 6 distinct values,
    as a bag-of-words embedder gives: 0.98 ms against 0.06)."""
    total = len(scores)
    if k >= total:
        top = np.arange(total)
    else:
        pool = above_block_maxima(scores, k)
        top = np.argpartition(-(scores if pool is None else scores[pool]), k - 1)[:k]
        if pool is not None:
            top = pool[top]
        top.sort()
    return top[np.argsort(-scores[top], kind="stable")]


def kth_highest(values: NDArray[np.float32], k: int) -> float:
    """The k-th highest of `values` (1 <= k <= len), partitioning only the values that can be among the k highest
    (`above_block_maxima` over blocks of `KTH_BLOCK`); 10k values: ~20 µs instead of ~50 for a partition of all."""
    pool = above_block_maxima(values, k, KTH_BLOCK)
    if pool is not None:
        values = values[pool]
    return float(-np.partition(-values, k - 1)[k - 1])  # negated: see `top_rows`


def above_block_maxima(scores: NDArray[np.float32], k: int, block: int = TOP_BLOCK) -> NDArray[np.intp] | None:
    """The rows that can be among the k best of many scores, or None when there are too few for this to pay: the
    k-th highest of the maxima of blocks of `block` scores is at most the k-th highest score (k blocks reach it),
    so every row of the top k scores at least that. One pass for the maxima and one comparison replace a partition of
    every score (1M scores: ~2 ms instead of ~8)."""
    blocks = len(scores) // block
    if blocks < 4 * k:
        return None
    maxima = scores[: blocks * block].reshape(blocks, block).max(axis=1)
    floor = -np.partition(-maxima, k - 1)[k - 1]  # the k-th highest (see `top_rows` for the negation)
    return np.flatnonzero(scores >= floor)
