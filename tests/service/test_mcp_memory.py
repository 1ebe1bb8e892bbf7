"""The MCP memory tools (`server/mcp_memory.py`), driven by the official MCP client over streamable HTTP on the HTTP
service: add, get, list (newest first, with the total), search, update, delete, each change in the memory's history
and the audit log as its HTTP route's is, and a key's tools reaching only its workspaces."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from reme_service.app import ReMeApp
from reme_service.auth.keyfile import create_key
from reme_service.server.http import create_http_app
from reme_service.testing.serve import serve_in_thread

pytestmark = [pytest.mark.service, pytest.mark.own_backend]

MEMORY_TOOLS = {"add_memory", "search_memories", "get_memory", "update_memory", "delete_memory", "list_memories"}


@asynccontextmanager
async def session_for(base_url: str, key: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {key}"}) as http,
        streamable_http_client(f"{base_url}/mcp", http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result
    return dict(result.structuredContent or {})


async def refused(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert result.isError, result
    return dict((result.structuredContent or {})["metadata"]["error"])


@pytest.mark.anyio
async def test_memory_tools_change_memories_as_the_management_api_does(tmp_path: Path) -> None:
    keys = tmp_path / "data" / "auth" / "keys.json"
    _, alice = create_key(keys, workspaces=["alice"], scope="write")
    _, bob = create_key(keys, workspaces=["bob"], scope="write")
    app = ReMeApp(f"data_dir={tmp_path / 'data'}", "embedding_model.default.backend=hash", env={})
    with serve_in_thread(create_http_app(app)) as base_url:
        async with session_for(base_url, alice) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) >= MEMORY_TOOLS and "retrieve_task_memory" in tools  # beside the flows
            assert tools["add_memory"].inputSchema["required"] == ["content"]

            first = (await call(session, "add_memory", workspace_id="alice", content="Alice is vegetarian"))["memory"]
            second = (await call(session, "add_memory", workspace_id="alice", content="Alice flies to Oslo on Friday"))[
                "memory"
            ]
            assert first["memory_type"] == "personal" and first["when_to_use"] == "Alice is vegetarian"
            got = await call(session, "get_memory", workspace_id="alice", memory_id=first["memory_id"])
            assert got["memory"]["content"] == "Alice is vegetarian"

            listed = await call(session, "list_memories", workspace_id="alice", limit=1)
            rest = await call(session, "list_memories", workspace_id="alice", limit=1, cursor=listed["next_cursor"])
            page = listed["memories"] + rest["memories"]
            assert listed["total"] == 2 and rest["next_cursor"] is None
            assert {m["memory_id"] for m in page} == {first["memory_id"], second["memory_id"]}
            times = [m["time_created"] for m in page]
            assert times == sorted(times, reverse=True)  # newest first (times are to the second)

            found = await call(session, "search_memories", workspace_id="alice", query="Alice flies to Oslo", top_k=1)
            assert [m["memory_id"] for m in found["memories"]] == [second["memory_id"]]

            updated = await call(
                session, "update_memory", workspace_id="alice", memory_id=first["memory_id"], content="Alice is vegan"
            )
            assert updated["memory"]["content"] == "Alice is vegan"
            assert (await refused(session, "update_memory", workspace_id="alice", memory_id=first["memory_id"]))[
                "code"
            ] == "invalid_request"
            assert await call(session, "delete_memory", workspace_id="alice", memory_id=second["memory_id"]) == {
                "deleted": True,
                "memory_id": second["memory_id"],
            }
            gone = await refused(session, "get_memory", workspace_id="alice", memory_id=second["memory_id"])
            assert gone["code"] == "not_found"
            bad = await refused(session, "search_memories", workspace_id="alice", query="x", top_k=0)
            assert "top_k" in bad["message"]

        async with session_for(base_url, bob) as session:  # the key's scope: alice's memories are not bob's
            assert (await refused(session, "list_memories", workspace_id="alice"))["code"] == "forbidden"
            assert (await refused(session, "add_memory", workspace_id="alice", content="x"))["code"] == "forbidden"
            assert (await refused(session, "delete_memory", workspace_id="alice", memory_id=first["memory_id"]))[
                "code"
            ] == "forbidden"

        async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {alice}"}) as http:
            history = (await http.get(f"/workspaces/alice/memories/{first['memory_id']}/history")).json()
            assert [entry["event"] for entry in history] == ["ADD", "UPDATE"]
    audit = [
        orjson.loads(line)
        for day in (tmp_path / "data" / "audit").glob("*.jsonl")
        for line in day.read_bytes().splitlines()
    ]
    manage = [(r["action"], r["status"], r["error_code"]) for r in audit if r["flow"] == "manage"]
    assert ("create_memory", "ok", None) in manage and ("patch_memory", "ok", None) in manage
    assert ("delete_memory", "ok", None) in manage and ("delete_memory", "error", "forbidden") in manage  # refusals too
