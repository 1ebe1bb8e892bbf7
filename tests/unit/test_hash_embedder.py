"""The hash embedder: its per-token path (small batches) and vectorised path (large ones) give the same vectors."""

from __future__ import annotations

import math
import random
import re
from collections import Counter

import numpy as np
import pytest

from reme_service.providers.embedding.hash import HashEmbeddingClient, _bucket

pytestmark = pytest.mark.anyio

WORDS: tuple[str, ...] = ("alpha", "beta", "gamma", "delta", "the", "a", "of", "to", "debugging", "postgres", "schema")
WORDS += ("kubernetes", "Ünïcode", "wörds", "中文", "字", "42", "x_y")


def reference(texts: list[str], dim: int) -> np.ndarray:
    """The embedder's definition, written out plainly: signed 1 + log(tf) per bucket, then L2 normalisation."""
    out = np.zeros((len(texts), dim), np.float64)
    for row, text in enumerate(texts):
        for token, tf in Counter(re.findall(r"\w+", text.lower())).items():
            index, sign = _bucket(token, dim)
            out[row, index] += sign * (1.0 + math.log(tf))
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return out / norms


def make_texts(count: int, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 25))) for _ in range(count)]
    return [*texts, "", "!!! ???", "the the the THE", "a a b b b c c c c"]


@pytest.mark.parametrize("dim", [8, 384])
def test_both_paths_match_the_definition_and_each_other(dim: int) -> None:
    client = HashEmbeddingClient(dimensions=dim)
    texts = make_texts(300)
    batch = client.embed_sync(texts)  # vectorised (many texts)
    singles = np.vstack([client.embed_sync([text]) for text in texts])  # per-token loop (one text)
    assert batch.dtype == np.float32 and batch.shape == (len(texts), dim)
    np.testing.assert_array_equal(batch, singles)
    np.testing.assert_allclose(batch, reference(texts, dim), atol=1e-6)
    assert not batch[len(texts) - 4].any() and not batch[len(texts) - 3].any()  # no tokens: a zero row


def test_rows_are_unit_length_and_deterministic() -> None:
    texts = make_texts(100, seed=9)[:100]
    first = HashEmbeddingClient().embed_sync(texts)
    second = HashEmbeddingClient().embed_sync(list(reversed(texts)))[::-1]
    np.testing.assert_array_equal(first, second)  # a row does not depend on the rest of the batch
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)


async def test_embed_inline_and_in_a_thread_agree() -> None:
    client = HashEmbeddingClient()
    texts = make_texts(200, seed=5)
    large = await client.embed(texts)  # more than 64 texts: computed in a worker thread
    small = np.vstack([await client.embed(texts[i : i + 10]) for i in range(0, len(texts), 10)])
    np.testing.assert_array_equal(large, small)


def test_empty_batch() -> None:
    assert HashEmbeddingClient().embed_sync([]).shape == (0, 384)
    assert HashEmbeddingClient().embed_sync([""] * 20).shape == (20, 384)
