"""The Python clients give the long `vector_store` actions (load, dump, copy) `load_timeout`, every other call
the client's `timeout`."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from reme_service.client import AsyncReMeClient, ReMeClient

pytestmark = pytest.mark.anyio

OK = {"success": True, "answer": "", "metadata": {"action_result": {"size": 0}}}


def recording(seen: list[tuple[str, Any]]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, request.extensions["timeout"]["read"]))
        return httpx.Response(200, json=OK)

    return httpx.MockTransport(handler)


def test_the_blocking_client_waits_longer_for_loads_and_dumps() -> None:
    seen: list[tuple[str, Any]] = []
    http = httpx.Client(transport=recording(seen), timeout=5.0)
    with ReMeClient("http://reme.test", http_client=http) as client:
        client.call("vector_store", action="load", path="lib", workspace_id="w")
        client.call("vector_store", action="dump", path="lib", workspace_id="w")
        client.call("vector_store", action="list", workspace_id="w")
        client.call("retrieve_task_memory", query="q", workspace_id="w")
    assert seen == [
        ("/vector_store", 1800.0),
        ("/vector_store", 1800.0),
        ("/vector_store", 5.0),
        ("/retrieve_task_memory", 5.0),
    ]


async def test_the_async_client_takes_a_load_timeout() -> None:
    seen: list[tuple[str, Any]] = []
    http = httpx.AsyncClient(transport=recording(seen))
    async with AsyncReMeClient("http://reme.test", http_client=http, load_timeout=60.0) as client:
        await client.call("vector_store", action="copy", src_workspace_id="a", workspace_id="w")
    await http.aclose()
    assert seen == [("/vector_store", 60.0)]
