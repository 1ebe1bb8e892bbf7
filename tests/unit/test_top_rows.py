"""`top_rows`, the top k of a workspace's scores: the same scores as a full sort, with or without ties."""

from __future__ import annotations

import numpy as np
import pytest

from reme_service.stores.inproc.ranking import TOP_BLOCK, above_block_maxima, top_rows


@pytest.mark.parametrize("rounding", [None, 1, 2])  # None: distinct scores; 1 or 2 decimals: many ties
@pytest.mark.parametrize("k", [1, 10, 100])
def test_top_rows_match_a_full_sort(rounding: int | None, k: int) -> None:
    rng = np.random.default_rng(k)
    scores = rng.random(200 * TOP_BLOCK + 123, dtype=np.float32)
    scores[rng.integers(0, len(scores), 50)] = 0.999  # a cluster of equal high scores across blocks
    if rounding is not None:
        scores = np.round(scores, rounding).astype(np.float32)
    top = top_rows(scores, k)
    assert len(set(top.tolist())) == k
    assert np.array_equal(scores[top], np.sort(scores)[::-1][:k])  # highest first, the k highest


def test_the_pool_is_used_for_many_scores_and_holds_every_top_row() -> None:
    scores = np.random.default_rng(0).random(100 * TOP_BLOCK, dtype=np.float32)
    pool = above_block_maxima(scores, 10)
    assert pool is not None and len(pool) < len(scores) // 100
    assert set(np.argsort(-scores)[:10].tolist()) <= set(pool.tolist())
    assert above_block_maxima(scores[: 30 * TOP_BLOCK], 10) is None  # too few blocks for the bound to help


@pytest.mark.parametrize("total", [1_000, 200 * TOP_BLOCK])  # without and with the block-maxima pool
def test_equal_scores_come_in_row_order(total: int) -> None:
    """Few distinct scores (what a bag-of-words embedder gives): the top k are the highest, ties by row."""
    scores = (np.random.default_rng(1).integers(0, 6, total) / 6).astype(np.float32)
    top = top_rows(scores, 20)
    assert np.array_equal(scores[top], np.sort(scores)[::-1][:20])
    pairs = list(zip(scores[top].tolist(), top.tolist(), strict=True))
    assert pairs == sorted(pairs, key=lambda pair: (-pair[0], pair[1]))
