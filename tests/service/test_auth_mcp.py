"""API keys on MCP's SSE and streamable-HTTP transports: no key → 401 before any session; a key's tool calls
reach only its workspaces (the caller is bound to the session and to each call)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from reme_service.app import ReMeApp
from reme_service.auth.keyfile import create_key
from reme_service.server.http import create_http_app
from reme_service.server.mcp import create_mcp_http_app
from tests.fakes.serve import serve_in_thread

pytestmark = [pytest.mark.service, pytest.mark.anyio, pytest.mark.own_backend]


@asynccontextmanager
async def session_for(base_url: str, transport: str, key: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"}
    if transport == "sse":
        async with sse_client(f"{base_url}/sse", headers=headers) as streams, opened(streams) as session:
            yield session
        return
    async with (
        httpx.AsyncClient(timeout=30, headers=headers) as http,
        streamable_http_client(f"{base_url}/mcp", http_client=http) as streams,
        opened(streams) as session,
    ):
        yield session


@asynccontextmanager
async def opened(streams: Any) -> AsyncIterator[ClientSession]:
    async with ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        yield session


def result_of(call: Any) -> dict[str, Any]:
    return dict(call.structuredContent or {})


@pytest.mark.parametrize("mounted", [False, True], ids=["mcp-alone", "mounted-on-http"])
@pytest.mark.parametrize("transport", ["sse", "streamable-http"])
async def test_mcp_over_http_checks_keys_and_workspaces(tmp_path: Path, transport: str, mounted: bool) -> None:
    keys = tmp_path / "data" / "auth" / "keys.json"
    _, alice = create_key(keys, workspaces=["alice"], scope="write")
    _, bob = create_key(keys, workspaces=["bob"], scope="write")
    app = ReMeApp(f"data_dir={tmp_path / 'data'}", "embedding_model.default.backend=hash", env={})
    memory = {"when_to_use": "deploying", "content": "alice-only marker 7f3a"}
    served: Any = create_http_app(app) if mounted else create_mcp_http_app(app, transport)  # type: ignore[arg-type]
    with serve_in_thread(served) as base_url:
        path = "/sse" if transport == "sse" else "/mcp"
        async with httpx.AsyncClient(timeout=10) as plain:
            refused = await plain.request("GET" if transport == "sse" else "POST", f"{base_url}{path}", json={})
        assert refused.status_code == 401 and refused.json()["metadata"]["error"]["code"] == "unauthorized"
        async with session_for(base_url, transport, alice) as session:
            stored = await session.call_tool(
                "vector_store", {"workspace_id": "alice", "action": "insert", "memory_dicts": [memory]}
            )
            assert result_of(stored)["success"] is True
        async with session_for(base_url, transport, bob) as session:
            listed = await session.call_tool("vector_store", {"workspace_id": "alice", "action": "list"})
            assert listed.isError and result_of(listed)["metadata"]["error"]["code"] == "forbidden"
            assert "7f3a" not in str(listed)
            own = await session.call_tool("vector_store", {"workspace_id": "bob", "action": "list"})
            assert result_of(own)["success"] is True and "7f3a" not in str(own)
