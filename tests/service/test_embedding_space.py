"""Embedding spaces over HTTP (#21 item 5): a workspace records the embedder its vectors come from; a service
restarted with another embedder refuses to write or search it (409 naming both) until `vector_store
action=reembed`, which runs as a job and swaps the new vectors in at once — also across a kill -9."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.memory import memory_from_dict
from reme_service.stores.inproc.local import LocalVectorStore
from reme_service.stores.params import LocalStoreParams
from reme_service.stores.spaces import space_of
from reme_service.testing.openai_server import FakeOpenAI
from tests.conditions import until_sync
from tests.fakes.service_process import service_process
from tests.service.conftest import ServeFn

pytestmark = [pytest.mark.service]

HASH_SPACE = {"provider": "hash", "model": "hash-bow", "dimensions": 384}


def memories(count: int) -> list[dict[str, Any]]:
    return [
        {"memory_id": f"m{i:03d}", "when_to_use": f"when the user asks about topic {i} number{i}", "content": f"c{i}"}
        for i in range(count)
    ]


def insert(client: httpx.Client, items: list[dict[str, Any]]) -> httpx.Response:
    return client.post("/vector_store", json={"workspace_id": "ws", "action": "insert", "memory_dicts": items})


def retrieve(client: httpx.Client, query: str) -> httpx.Response:
    return client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": query, "top_k": 1})


def workspace(client: httpx.Client) -> dict[str, Any]:
    listed = client.get("/workspaces").json()["workspaces"]
    return next(w for w in listed if w["workspace_id"] == "ws")


@pytest.mark.parametrize(
    ("override", "label"),
    [
        ("embedding_model.default.params.model_name=hash-v2", "hash/hash-v2 (384 dimensions)"),  # same dimension
        ("embedding_model.default.params.dimensions=256", "hash/hash-bow (256 dimensions)"),
    ],
)
def test_another_embedder_is_refused_until_reembedded(serve: ServeFn, override: str, label: str) -> None:
    with serve() as client:
        assert insert(client, memories(3)).status_code == 200
        assert workspace(client)["embedding_space"] == HASH_SPACE
        assert workspace(client)["needs_reembed"] is False
    with serve(override) as client:
        for refused in (insert(client, memories(1)), retrieve(client, "topic 1")):
            assert refused.status_code == 409, refused.text
            error = refused.json()["metadata"]["error"]
            assert error["code"] == "conflict" and refused.json()["success"] is False
            assert "hash/hash-bow (384 dimensions)" in error["message"] and label in error["message"]
            assert "reembed" in error["message"]
        assert workspace(client)["needs_reembed"] is True
        listed = client.post("/vector_store", json={"workspace_id": "ws", "action": "list"})
        assert len(listed.json()["metadata"]["action_result"]) == 3  # reading the memories still works
        accepted = client.post("/vector_store", json={"workspace_id": "ws", "action": "reembed"})
        assert accepted.status_code == 202, accepted.text  # a job, though the request did not say "async"
        job = client.get(f"/jobs/{accepted.json()['job_id']}", params={"wait": 30}).json()
        assert job["status"] == "done", job
        result = job["result"]["metadata"]["action_result"]
        assert result["size"] == 3 and result["from_space"] == HASH_SPACE
        assert workspace(client)["needs_reembed"] is False
        # the same memories with new vectors: their history goes on (no DELETE and ADD of every memory)
        history = client.get(f"/workspaces/ws/memories/{memories(3)[0]['memory_id']}/history").json()
        assert [entry["event"] for entry in history] == ["ADD"], history
        found = retrieve(client, "topic 1 number1")
        assert found.status_code == 200 and "topic 1 number1" in found.json()["answer"]
        assert insert(client, memories(4)).status_code == 200


async def local_store(data: Path, use: Callable[[LocalVectorStore], Awaitable[None]]) -> None:
    """Open the local store of `data` with the hash embedder (the service is not running) and `use` it."""
    store = LocalVectorStore(LocalStoreParams(), embedder=HashEmbeddingClient(), data_dir=data)
    await store.start()
    try:
        await use(store)
    finally:
        await store.close()


async def written(store: LocalVectorStore) -> None:
    await store.upsert("ws", [memory_from_dict({**m, "workspace_id": "ws"}).to_vector_node() for m in memories(40)])


async def intact(store: LocalVectorStore) -> None:
    """The workspace as `written` left it: every memory, its hash vectors and space, searchable."""
    nodes = await store.list_nodes("ws", with_vectors=True)
    assert [n.unique_id for n in nodes] == [m["memory_id"] for m in memories(40)]
    assert all(n.vector is not None and len(n.vector) == 384 for n in nodes)
    assert await store.workspace_space("ws") == space_of(store.embedder)
    hits = await store.search("ws", "when the user asks about topic 7 number7", top_k=1)
    assert hits[0].node.unique_id == "m007"


@pytest.mark.own_backend
def test_a_kill_during_reembed_leaves_the_old_workspace_and_the_job_finishes_after_restart(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """kill -9 while the job embeds: the local store still holds the old vectors and space, whole; after a restart
    the job runs again and swaps the new ones in."""
    fake, url = fake_openai, fake_openai.base_url
    data = tmp_path / "data"
    common = (f"data_dir={data}", "vector_store.default.backend=local")
    remote = (
        "embedding_model.default.backend=openai_compatible",
        f"embedding_model.default.base_url={url}",
        "embedding_model.default.api_key=k",
        "embedding_model.default.model_name=fake-embed",
        "embedding_model.default.params.dimensions=64",
    )
    asyncio.run(local_store(data, written))
    with service_process(tmp_path, *common, *remote) as service:
        seen = len(fake.requests_to("embeddings"))
        fake.delay_next(1, seconds=60, endpoint="embeddings")  # holds the reembed's first batch
        accepted = httpx.post(f"{service.base_url}/vector_store", json={"workspace_id": "ws", "action": "reembed"})
        assert accepted.status_code == 202, accepted.text
        until_sync(lambda: len(fake.requests_to("embeddings")) > seen, limit=30)
        os.kill(service.process.pid, signal.SIGKILL)
        service.process.wait()

    asyncio.run(local_store(data, intact))
    with (
        service_process(tmp_path, *common, *remote) as service,
        httpx.Client(base_url=service.base_url, timeout=40) as client,
    ):
        job = client.get(f"/jobs/{accepted.json()['job_id']}", params={"wait": 30}).json()
        assert job["status"] == "done" and job["attempts"] == 2, job
        space = workspace(client)["embedding_space"]
        assert space == {"provider": "openai_compatible", "model": "fake-embed", "dimensions": 64}
        assert retrieve(client, "topic 7 number7").json()["answer"].count("number7") == 1
