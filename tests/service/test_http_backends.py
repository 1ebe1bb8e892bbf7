"""The HTTP service unchanged on every backend: representative flows on local, Chroma (a real `chroma run` server),
Elasticsearch (the protocol test server, or REME_TEST_ES_URL) and PostgreSQL (pgvector), then what a remote store
adds: down at start -> the service starts, /health says why, requests get 503 with the reason, recovery without a
restart; and a collection of another dimension -> 400 at the first write naming both dimensions."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.stores.chroma.client import close_async_http_client
from reme_service.stores.names import chroma_collection_name
from reme_service.testing.serve import serve_in_thread
from tests.fakes.chroma_server import ChromaServer, chroma_server, free_port, running_chroma  # noqa: F401
from tests.fakes.es_server import FakeElasticsearch
from tests.fakes.pg_server import pg_dsn, running_postgres  # noqa: F401 - pg_dsn: fixture used by name
from tests.service.conftest import ServeFn

pytestmark = [pytest.mark.service, pytest.mark.own_backend]  # every backend in every pass

HASH_DIMENSIONS = 384  # the hash embedder the service fixture configures

MEMORIES = [
    {"memory_id": "m1", "when_to_use": "update the user profile settings", "content": "open settings", "score": 0.7},
    {"memory_id": "m2", "when_to_use": "send an email to a contact", "content": "look the contact up", "score": 0.5},
    {"memory_id": "m3", "when_to_use": "book a flight ticket", "content": "compare prices first", "score": 0.9},
]
CALL = {
    "tool_name": "web_search",
    "input": {"query": "asyncio", "options": {"max_results": 10, "lang": None}},
    "output": "Found 10 results ✓",
    "token_cost": 150,
    "success": True,
    "time_cost": 2.3,
}


@pytest.fixture(scope="module")
def es_url() -> Iterator[str]:
    real = os.environ.get("REME_TEST_ES_URL", "").strip()
    if real:
        yield real
        return
    with serve_in_thread(FakeElasticsearch().app) as url:
        yield url


@pytest.fixture(params=["local", "chroma", "elasticsearch", "pgvector"])
def backend(request: pytest.FixtureRequest) -> list[str]:
    """The overrides selecting a backend, each run in its own namespace on the shared servers."""
    prefix = f"s{secrets.token_hex(4)}-"
    if request.param == "chroma":
        server: ChromaServer = request.getfixturevalue("chroma_server")
        return [
            "vector_store.default.backend=chroma",
            f"vector_store.default.params.host={server.host}",
            f"vector_store.default.params.port={server.port}",
            f"vector_store.default.params.collection_prefix={prefix}",
        ]
    if request.param == "pgvector":
        return [
            "vector_store.default.backend=pgvector",
            f"vector_store.default.params.dsn={request.getfixturevalue('pg_dsn')}",
            f"vector_store.default.params.table_prefix={prefix.replace('-', '_')}",
        ]
    if request.param == "elasticsearch":
        return [
            "vector_store.default.backend=elasticsearch",
            f"vector_store.default.params.hosts={request.getfixturevalue('es_url')}",
            f"vector_store.default.params.index_prefix={prefix}",
        ]
    return ["vector_store.default.backend=local"]


def post(client: httpx.Client, flow: str, **body: Any) -> dict[str, Any]:
    r = client.post(f"/{flow}", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["success"] is True
    return r.json()


def action(client: httpx.Client, workspace: str, name: str, **fields: Any) -> Any:
    return post(client, "vector_store", workspace_id=workspace, action=name, **fields)["metadata"]["action_result"]


def test_health_names_the_backend(serve: ServeFn, backend: list[str]) -> None:
    with serve(*backend) as client:
        health = client.get("/health").json()
        assert health["status"] == "healthy"
        assert health["vector_store"]["default"]["status"] == "ok"
        assert health["vector_store"]["default"]["backend"] == backend[0].split("=")[1]


def test_retrieval_returns_stored_score_and_relevance(serve: ServeFn, backend: list[str]) -> None:
    with serve(*backend) as client:
        action(client, "ws", "insert", memory_dicts=MEMORIES)
        body = post(client, "retrieve_task_memory", workspace_id="ws", query="update my profile settings", top_k=2)
        top, second = body["metadata"]["memory_list"]
        assert top["memory_id"] == "m1" and top["score"] == 0.7
        assert 0 <= second["relevance"] <= top["relevance"] <= 1 and top["relevance"] > 0
        assert post(client, "retrieve_task_memory", workspace_id="nowhere", query="x")["metadata"] == {
            "memory_list": []
        }


def test_vector_store_round_trip(serve: ServeFn, backend: list[str], tmp_path: Path) -> None:
    with serve(*backend) as client:
        action(client, "ws", "insert", memory_dicts=MEMORIES)
        assert [m["memory_id"] for m in action(client, "ws", "list")] == ["m1", "m2", "m3"]
        assert action(client, "ws", "dump", path="dumps")["size"] == 3
        assert (tmp_path / "data" / "libraries" / "dumps" / "ws.jsonl").read_text().count("\n") == 3
        assert action(client, "ws2", "load", path="dumps/ws.jsonl") == {"size": 3}
        assert {m["workspace_id"] for m in action(client, "ws2", "list")} == {"ws2"}
        assert action(client, "ws3", "copy", src_workspace_id="ws") == {"size": 3}
        missing = post(client, "vector_store", workspace_id="ws4", action="copy", src_workspace_id="nowhere")
        assert missing["success"] is True and missing["metadata"]["action_result"] == {"size": 0}  # as ReMe 0.2
        assert missing["metadata"]["warning"] == "the source workspace does not exist; nothing was copied"
        assert action(client, "ws3", "delete_ids", memory_ids=["m1", "m2"]) == {"deleted_count": 2}
        assert [m["memory_id"] for m in action(client, "ws3", "list")] == ["m3"]
        purged = {"memories": 1, "working_memory_files": 0, "jobs": 0}
        assert action(client, "ws3", "delete") == {"deleted": True, "purged": purged}
        assert action(client, "ws3", "list") == []


def test_insert_naming_an_id_twice_answers_what_was_stored(serve: ServeFn, backend: list[str]) -> None:
    """The id's last version is stored, once; the answer names each id once, in order of first appearance, and
    counts the memories stored, not the dicts sent."""
    m1, m2 = MEMORIES[0], MEMORIES[1]
    with serve(*backend) as client:
        sent = [{**m1, "content": "first version"}, m2, {**m1, "content": "last version"}]
        assert action(client, "ws", "insert", memory_dicts=sent) == {"size": 2, "memory_ids": ["m1", "m2"]}
        stored = {m["memory_id"]: m["content"] for m in action(client, "ws", "list")}
        assert stored == {"m1": "last version", "m2": m2["content"]}


def test_record_counts_atomically_and_delete_removes(serve: ServeFn, backend: list[str]) -> None:
    with serve(*backend) as client:
        action(client, "ws", "insert", memory_dicts=MEMORIES)
        memory_list = post(client, "retrieve_task_memory", workspace_id="ws", query="task", top_k=3)["metadata"][
            "memory_list"
        ]

        async def fire(count: int) -> list[int]:
            async with httpx.AsyncClient(base_url=str(client.base_url), timeout=60) as aclient:
                body = {"workspace_id": "ws", "memory_dicts": memory_list}
                calls = [
                    aclient.post("/record_task_memory", json={**body, "update_utility": n % 2 == 0}) for n in range(12)
                ]
                return [r.status_code for r in await asyncio.gather(*calls)]

        assert asyncio.run(fire(12)) == [200] * 12
        stored = {m["memory_id"]: m["metadata"] for m in action(client, "ws", "list")}
        assert stored == {mid: {"freq": 12, "utility": 6} for mid in ("m1", "m2", "m3")}
        r = post(client, "delete_task_memory", workspace_id="ws", freq_threshold=12, utility_threshold=0.6)
        assert sorted(r["metadata"]["deleted_memory_ids"]) == ["m1", "m2", "m3"]
        assert action(client, "ws", "list") == []


def test_tool_call_results_are_stored_losslessly(serve: ServeFn, backend: list[str]) -> None:
    with serve(*backend) as client:
        post(client, "add_tool_call_result", workspace_id="ws", tool_call_results=[CALL])
        (memory,) = post(client, "retrieve_tool_memory", workspace_id="ws", tool_names="web_search")["metadata"][
            "memory_list"
        ]
        (stored,) = memory["tool_call_results"]
        assert {key: stored[key] for key in CALL} == CALL


def _wait(check: Callable[[], bool], timeout: float = 20.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.2)


def check_down_then_recovers(
    serve: ServeFn, overrides: list[str], port: int, start_store: Callable[[], AbstractContextManager[Any]]
) -> None:
    """A service whose store (to be at 127.0.0.1:`port`) is down at start: it starts, says why on /health (503,
    ready 503, live 200), answers 503 with the reason, serves once `start_store()` brings the store up, and
    answers 503 again, still alive, when it goes away."""
    with serve(*overrides) as client:
        answer = client.get("/health")
        health = answer.json()
        assert answer.status_code == 503 and health["status"] == "down"  # nothing can be stored or found
        store = health["vector_store"]["default"]
        assert store["status"] == "down" and f"127.0.0.1:{port}" in store["reason"]
        ready = client.get("/health/ready")
        assert ready.status_code == 503 and ready.json()["status"] == "not_ready"
        assert any(r.startswith("vector_store.default:") and f"127.0.0.1:{port}" in r for r in ready.json()["reasons"])
        assert client.get("/health/live").status_code == 200  # alive: an orchestrator must not restart it
        r = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "anything"})
        assert r.status_code == 503
        error = r.json()["metadata"]["error"]
        assert error["code"] == "store_unavailable" and "unreachable" in error["message"]
        assert r.json()["success"] is False
        r = client.post("/vector_store", json={"workspace_id": "ws", "action": "insert", "memory_dicts": MEMORIES})
        assert r.status_code == 503
        with start_store():
            _wait(lambda: client.get("/health").json()["status"] == "healthy")
            assert client.get("/health/ready").json() == {"status": "ready", "health": "healthy"}
            action(client, "ws", "insert", memory_dicts=MEMORIES)
            body = post(client, "retrieve_task_memory", workspace_id="ws", query="book a flight", top_k=1)
            assert body["metadata"]["memory_list"][0]["memory_id"] == "m3"
        r = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "anything"})
        assert r.status_code == 503  # down again: 503 again, and the service is still up
        assert client.get("/health/live").status_code == 200
        assert client.get("/health/ready").status_code == 503


def test_chroma_down_at_start_then_recovers_without_restart(serve: ServeFn, tmp_path: Path) -> None:
    port = free_port()
    overrides = [
        "vector_store.default.backend=chroma",
        "vector_store.default.params.host=127.0.0.1",
        f"vector_store.default.params.port={port}",
        "vector_store.default.params.timeout=5",
    ]
    check_down_then_recovers(serve, overrides, port, lambda: running_chroma(tmp_path / "late-chroma", port))


def test_postgres_down_at_start_then_recovers_without_restart(serve: ServeFn, tmp_path: Path) -> None:
    port = free_port()
    overrides = [
        "vector_store.default.backend=pgvector",
        f"vector_store.default.params.dsn=postgresql://postgres@127.0.0.1:{port}/postgres",
        "vector_store.default.params.timeout=5",
    ]
    check_down_then_recovers(serve, overrides, port, lambda: running_postgres(tmp_path / "late-postgres", port))


def test_elasticsearch_down_at_start_is_503_with_the_reason_and_no_password(serve: ServeFn) -> None:
    """The reason names the host (so an operator sees what is down) but never the credentials of its URL: /health is
    open to anyone who can reach the port."""
    where = f"127.0.0.1:{free_port()}"
    overrides = [
        "vector_store.default.backend=elasticsearch",
        f"vector_store.default.params.hosts=http://elastic:EsSecretPW@{where}",
        "vector_store.default.params.max_retries=0",
    ]
    with serve(*overrides) as client:
        health = client.get("/health")
        store = health.json()["vector_store"]["default"]
        assert store["status"] == "down" and f"http://{where}" in store["reason"]
        ready = client.get("/health/ready")
        r = client.post("/vector_store", json={"workspace_id": "ws", "action": "list"})
        assert r.status_code == 503 and r.json()["metadata"]["error"]["code"] == "store_unavailable"
        assert where in r.json()["metadata"]["error"]["message"]
        for text in (health.text, ready.text, r.text):
            assert "EsSecretPW" not in text and "elastic:" not in text


def test_foreign_dimension_is_400_at_the_first_write(serve: ServeFn, chroma_server: ChromaServer) -> None:  # noqa: F811
    import chromadb

    async def make_foreign(name: str) -> None:
        client = await chromadb.AsyncHttpClient(host=chroma_server.host, port=chroma_server.port)
        collection = await client.get_or_create_collection(name, embedding_function=None)
        await collection.add(
            ids=["old"], embeddings=np.array([[0.5, 0.5, 0.5]], np.float32), documents=["written elsewhere"]
        )
        await close_async_http_client(client)

    prefix = f"d{secrets.token_hex(4)}-"
    asyncio.run(make_foreign(chroma_collection_name(WorkspaceId("ws"), prefix)))
    overrides = [
        "vector_store.default.backend=chroma",
        f"vector_store.default.params.host={chroma_server.host}",
        f"vector_store.default.params.port={chroma_server.port}",
        f"vector_store.default.params.collection_prefix={prefix}",
    ]
    with serve(*overrides) as client:
        assert_foreign_dimension_refused(client)


def test_postgres_foreign_dimension_is_400_naming_both(serve: ServeFn, pg_dsn: str) -> None:  # noqa: F811
    import numpy as np

    from reme_service.providers.embedding.hash import HashEmbeddingClient
    from reme_service.schema.vector_node import VectorNode
    from reme_service.stores.params import PgvectorStoreParams
    from reme_service.stores.pg.store import PgvectorVectorStore

    prefix = f"d{secrets.token_hex(4)}_"

    async def write_elsewhere() -> None:  # another deployment wrote 3-dimensional vectors into the workspace
        params = PgvectorStoreParams(dsn=pg_dsn, table_prefix=prefix)
        store = PgvectorVectorStore(params, embedder=HashEmbeddingClient(dimensions=8))  # (the vector is given)
        node = VectorNode(unique_id="old", content="written elsewhere", vector=np.array([0.6, 0.8, 0.0], np.float32))
        await store.upsert("ws", [node])
        await store.close()

    asyncio.run(write_elsewhere())
    overrides = [
        "vector_store.default.backend=pgvector",
        f"vector_store.default.params.dsn={pg_dsn}",
        f"vector_store.default.params.table_prefix={prefix}",
    ]
    with serve(*overrides) as client:
        assert_foreign_dimension_refused(client)
        r = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "anything"})
        assert r.status_code == 400 and r.json()["metadata"]["error"]["code"] == "dimension_mismatch"


def assert_foreign_dimension_refused(client: httpx.Client) -> None:
    """An insert into a workspace another deployment wrote at dimension 3 is a 400 naming both dimensions."""
    r = client.post("/vector_store", json={"workspace_id": "ws", "action": "insert", "memory_dicts": MEMORIES})
    assert r.status_code == 400, r.text
    error = r.json()["metadata"]["error"]
    assert error["code"] == "dimension_mismatch"
    assert (error["details"]["expected"], error["details"]["actual"]) == (3, HASH_DIMENSIONS)
    assert "dimension 3" in error["message"] and f"dimension {HASH_DIMENSIONS}" in error["message"]
