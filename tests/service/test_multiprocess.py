"""Two real service processes on one shared store (a Chroma server; Elasticsearch: its protocol test server, or a
real cluster with REME_TEST_ES_URL; PostgreSQL with pgvector): concurrent writers from both lose nothing (issue 9,
item 4).

Counter increments (`record_task_memory`) and tool-call appends (`add_tool_call_result`) are read-modify-write
flows, so they rely on the store's cross-process workspace lock; plain inserts only need every write to land.
All three run at once, requests alternating between the processes."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.contract.test_es_store import es_url  # noqa: F401 - fixture used by name
from tests.fakes.chroma_server import ChromaServer, chroma_server  # noqa: F401
from tests.fakes.pg_server import pg_dsn  # noqa: F401 - fixture used by name
from tests.fakes.service_process import running_service

pytestmark = [pytest.mark.service, pytest.mark.own_backend]  # its own store in every pass

REQUESTS = 24


@pytest.fixture(params=["chroma", "elasticsearch", "pgvector"])
def two_processes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    prefix = f"mp{secrets.token_hex(4)}-"
    overrides = ["embedding_model.default.backend=hash", f"vector_store.default.backend={request.param}"]
    if request.param == "pgvector":
        dsn: str = request.getfixturevalue("pg_dsn")
        table_prefix = prefix.replace("-", "_")  # PostgreSQL names: [a-z0-9_]
        overrides += [f"vector_store.default.params.dsn={dsn}"]
        overrides += [f"vector_store.default.params.table_prefix={table_prefix}"]
    elif request.param == "chroma":
        server: ChromaServer = request.getfixturevalue("chroma_server")
        overrides += [
            f"vector_store.default.params.host={server.host}",
            f"vector_store.default.params.port={server.port}",
            f"vector_store.default.params.collection_prefix={prefix}",
        ]
    else:
        url: str = request.getfixturevalue("es_url")
        overrides += [f"vector_store.default.params.hosts={url}", f"vector_store.default.params.index_prefix={prefix}"]
    with ExitStack() as stack:
        yield [stack.enter_context(running_service(tmp_path / f"p{i}", *overrides)) for i in range(2)]


async def _post(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(path, json=body)
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()
    assert payload["success"] is True, payload
    return payload


async def _hammer(urls: list[str]) -> None:
    clients = [httpx.AsyncClient(base_url=url, timeout=120) for url in urls]
    try:
        memories = [{"memory_id": f"m{i}", "when_to_use": f"task number {i}", "content": f"c{i}"} for i in range(3)]
        await _post(clients[0], "/vector_store", {"workspace_id": "rec", "action": "insert", "memory_dicts": memories})
        named = [{"memory_id": f"m{i}"} for i in range(3)]
        work = []
        for n in range(REQUESTS):
            client = clients[n % 2]
            record = {"workspace_id": "rec", "memory_dicts": named, "update_utility": n % 2 == 0}
            work.append(_post(client, "/record_task_memory", record))
            call = {"tool_name": "web_search", "input": {"query": f"q{n}"}, "output": f"result {n}", "success": True}
            work.append(_post(client, "/add_tool_call_result", {"workspace_id": "tools", "tool_call_results": [call]}))
            memory = {"memory_id": f"i{n}", "when_to_use": f"insert {n}", "content": f"inserted by request {n}"}
            work.append(
                _post(client, "/vector_store", {"workspace_id": "ins", "action": "insert", "memory_dicts": [memory]})
            )
        await asyncio.gather(*work)
    finally:
        for client in clients:
            await client.aclose()


def _listed(client: httpx.Client, workspace: str) -> list[dict[str, Any]]:
    body = client.post("/vector_store", json={"workspace_id": workspace, "action": "list"}).json()
    return list(body["metadata"]["action_result"])


def test_concurrent_writers_in_two_processes_lose_nothing(two_processes: list[str]) -> None:
    asyncio.run(_hammer(two_processes))
    for url in two_processes:  # both processes see the same complete result
        with httpx.Client(base_url=url, timeout=60) as client:
            counters = {m["memory_id"]: m["metadata"] for m in _listed(client, "rec")}
            assert counters == {f"m{i}": {"freq": REQUESTS, "utility": REQUESTS // 2} for i in range(3)}
            r = client.post("/retrieve_tool_memory", json={"workspace_id": "tools", "tool_names": "web_search"})
            (tool,) = r.json()["metadata"]["memory_list"]
            assert sorted(c["input"]["query"] for c in tool["tool_call_results"]) == sorted(
                f"q{n}" for n in range(REQUESTS)
            )
            assert {m["memory_id"] for m in _listed(client, "ins")} == {f"i{n}" for n in range(REQUESTS)}
