"""`OpenAICompatibleEmbedding` against the fake OpenAI server, through the real openai client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import openai
import pytest

from reme_service.errors import EmbeddingError
from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.providers.embedding.openai_compatible import OpenAICompatibleEmbedding
from reme_service.testing.openai_server import FakeOpenAI

pytestmark = pytest.mark.anyio

DIMS = 64
TEXTS = [f"memory number {i} about topic {i % 7} and tea" for i in range(25)]


@pytest.fixture
async def embedder(fake_openai: FakeOpenAI) -> AsyncIterator[OpenAICompatibleEmbedding]:
    client = OpenAICompatibleEmbedding(
        model_name="text-embedding-v4",
        dimensions=DIMS,
        api_key="sk-test",
        base_url=fake_openai.base_url,
        max_batch_size=10,
        max_concurrency=2,
        max_retries=2,
        timeout=5.0,
        backoff=0.001,
    )
    yield client
    await client.close()


def expected(texts: list[str]) -> np.ndarray:
    return HashEmbeddingClient(dimensions=DIMS).embed_sync(texts)


async def test_batches_are_split_sent_and_reassembled(
    fake_openai: FakeOpenAI, embedder: OpenAICompatibleEmbedding
) -> None:
    vectors = await embedder.embed(TEXTS)
    assert vectors.shape == (25, DIMS)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, expected(TEXTS), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    bodies = fake_openai.requests_to("embeddings")
    assert sorted(len(body["input"]) for body in bodies) == [5, 10, 10]
    assert all(body["dimensions"] == DIMS for body in bodies)
    assert all(body["encoding_format"] == "float" for body in bodies)
    assert all(body["model"] == "text-embedding-v4" for body in bodies)
    sent = sorted(text for body in bodies for text in body["input"])
    assert sent == sorted(TEXTS)


async def test_results_are_reordered_by_index(fake_openai: FakeOpenAI, embedder: OpenAICompatibleEmbedding) -> None:
    fake_openai.shuffle_index = True
    vectors = await embedder.embed(TEXTS[:10])
    np.testing.assert_allclose(vectors, expected(TEXTS[:10]), atol=1e-6)


async def test_empty_input_makes_no_request(fake_openai: FakeOpenAI, embedder: OpenAICompatibleEmbedding) -> None:
    vectors = await embedder.embed([])
    assert vectors.shape == (0, DIMS)
    assert vectors.dtype == np.float32
    assert fake_openai.requests == []


async def test_dimension_mismatch_is_an_error(fake_openai: FakeOpenAI, embedder: OpenAICompatibleEmbedding) -> None:
    fake_openai.embedding_dimensions = 32
    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed(["one", "two"])
    assert "expected 64, got 32" in str(caught.value)
    assert caught.value.status == 502
    assert len(fake_openai.requests_to("embeddings")) == 1  # not retried


@pytest.mark.parametrize("offset", [-1, 2])
async def test_count_mismatch_is_an_error(
    fake_openai: FakeOpenAI, embedder: OpenAICompatibleEmbedding, offset: int
) -> None:
    fake_openai.vector_count_offset = offset
    with pytest.raises(EmbeddingError, match=f"expected 3, got {3 + offset}"):
        await embedder.embed(["a", "b", "c"])


async def test_server_errors_are_retried(fake_openai: FakeOpenAI, embedder: OpenAICompatibleEmbedding) -> None:
    fake_openai.fail_next(2, status=500, endpoint="embeddings")
    vectors = await embedder.embed(["hello world"])
    np.testing.assert_allclose(vectors, expected(["hello world"]), atol=1e-6)
    assert len(fake_openai.requests_to("embeddings")) == 3


async def test_persistent_failure_raises_with_provider_message(
    fake_openai: FakeOpenAI, embedder: OpenAICompatibleEmbedding
) -> None:
    fake_openai.fail_next(10, status=429, message="Requests rate limit exceeded", endpoint="embeddings")
    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed(["hello"])
    assert "Requests rate limit exceeded" in str(caught.value)
    assert "429" in str(caught.value)
    assert len(fake_openai.requests_to("embeddings")) == 3


async def test_client_error_is_not_retried(fake_openai: FakeOpenAI, embedder: OpenAICompatibleEmbedding) -> None:
    fake_openai.fail_next(5, status=400, message="input must not be empty")
    with pytest.raises(EmbeddingError, match="HTTP 400: input must not be empty"):
        await embedder.embed(["x"])
    assert len(fake_openai.requests_to("embeddings")) == 1


async def test_malformed_reply_is_retried(fake_openai: FakeOpenAI, embedder: OpenAICompatibleEmbedding) -> None:
    fake_openai.fail_next(1, malformed=True)
    vectors = await embedder.embed(["fine"])
    assert vectors.shape == (1, DIMS)
    assert len(fake_openai.requests_to("embeddings")) == 2


async def test_one_failing_batch_fails_the_call(fake_openai: FakeOpenAI, embedder: OpenAICompatibleEmbedding) -> None:
    fake_openai.fail_next(1, status=401, message="bad key")
    with pytest.raises(EmbeddingError, match="bad key"):
        await embedder.embed(TEXTS)


async def test_chat_faults_do_not_touch_embeddings(
    fake_openai: FakeOpenAI, embedder: OpenAICompatibleEmbedding
) -> None:
    fake_openai.fail_next(3, status=500, endpoint="chat")
    assert (await embedder.embed(["ok"])).shape == (1, DIMS)
    assert len(fake_openai.requests) == 1


async def test_fake_defaults_to_1024_dimensions_and_string_input(fake_openai: FakeOpenAI) -> None:
    async with openai.AsyncOpenAI(api_key="k", base_url=fake_openai.base_url, max_retries=0) as client:
        single = await client.embeddings.create(model="m", input="just one text", encoding_format="float")
        encoded = await client.embeddings.create(model="m", input=["a", "b"])  # the SDK's default encoding
    assert len(single.data) == 1
    assert len(single.data[0].embedding) == 1024
    assert [item.index for item in encoded.data] == [0, 1]
    assert all(len(item.embedding) == 1024 for item in encoded.data)


def test_constructor_validates_options() -> None:
    with pytest.raises(ValueError):
        OpenAICompatibleEmbedding(max_batch_size=0)
    with pytest.raises(ValueError):
        OpenAICompatibleEmbedding(max_concurrency=0)


async def test_health(embedder: OpenAICompatibleEmbedding) -> None:
    health = await embedder.health()
    assert health == {"status": "ok", "backend": "openai_compatible", "model": "text-embedding-v4", "dimensions": DIMS}
