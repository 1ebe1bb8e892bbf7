"""API keys on MCP's SSE and streamable-HTTP transports: no key → 401 before any session; a key's tool calls
reach only its workspaces (the caller is bound to the session and to each call)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from reme_service.app import ReMeApp
from reme_service.auth.keyfile import create_key, revoke_key
from reme_service.server.http import create_http_app
from reme_service.server.mcp import create_mcp_http_app
from reme_service.testing.serve import serve_in_thread
from tests.conditions import until_sync
from tests.service.conftest import ServeFn
from tests.sse import next_event

pytestmark = [pytest.mark.service, pytest.mark.own_backend]


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


@pytest.mark.anyio
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


# Sessions driven by hand (plain HTTP), to post to a session with another key than the one that opened it.

MARKER = {"when_to_use": "deploying", "content": "bob-only marker 5c2e"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def rpc(request_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def tool_call(request_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return rpc(request_id, "tools/call", {"name": "vector_store", "arguments": arguments})


INITIALIZE = rpc(
    "init",
    "initialize",
    {"protocolVersion": types.LATEST_PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
)
LIST_BOB = {"workspace_id": "bob", "action": "list"}


class SseSession:
    """A `GET /sse` stream read event by event, and its message URL (from the `endpoint` event)."""

    def __init__(self, http: httpx.Client, response: httpx.Response, key: str) -> None:
        self.http = http
        self.key = key
        self.lines = response.iter_lines()  # kept: a dropped line iterator closes the stream
        self.replied: list[str] = []  # ids of every reply read from the stream
        kind, self.endpoint = self.next_event()
        assert kind == "endpoint" and "session_id=" in self.endpoint

    def next_event(self) -> tuple[str, str]:
        return next_event(self.lines)

    def post(self, message: dict[str, Any], key: str | None = None) -> httpx.Response:
        return self.http.post(self.endpoint, json=message, headers=bearer(key or self.key))

    def reply(self, request_id: str) -> dict[str, Any]:
        """The reply to `request_id` (every reply read before it is kept in `replied`)."""
        while True:
            kind, data = self.next_event()
            message = json.loads(data) if kind == "message" else {}
            if "id" in message:
                self.replied.append(message["id"])
                if message["id"] == request_id:
                    return message

    def call(self, request_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
        assert self.post(tool_call(request_id, arguments)).status_code == 202
        return dict(self.reply(request_id)["result"])

    def initialize(self) -> None:
        assert self.post(INITIALIZE).status_code == 202
        assert "result" in self.reply("init")
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202


@pytest.mark.parametrize("mounted", [False, True], ids=["mcp-alone", "mounted-on-http"])
def test_an_sse_session_takes_messages_only_from_the_key_that_opened_it(tmp_path: Path, mounted: bool) -> None:
    """Another valid key posting to a session id gets the answer of a session that does not exist (404), and the
    opener's stream carries nothing for it: the call would have run with the opener's rights."""
    keys = tmp_path / "data" / "auth" / "keys.json"
    _, admin = create_key(keys, workspaces=["*"], scope="admin")
    _, zed = create_key(keys, workspaces=["zed"], scope="read")
    app = ReMeApp(f"data_dir={tmp_path / 'data'}", "embedding_model.default.backend=hash", env={})
    served: Any = create_http_app(app) if mounted else create_mcp_http_app(app, "sse")
    with (
        serve_in_thread(served) as base_url,
        httpx.Client(base_url=base_url, timeout=10) as http,
        http.stream("GET", "/sse", headers=bearer(admin)) as opened,
        http.stream("GET", "/sse", headers=bearer(zed)) as zed_opened,
    ):
        session = SseSession(http, opened, admin)
        session.initialize()
        stored = session.call("store", {"workspace_id": "bob", "action": "insert", "memory_dicts": [MARKER]})
        assert stored["structuredContent"]["success"] is True

        stolen = session.post(tool_call("stolen", LIST_BOB), key=zed)
        assert stolen.status_code == 404 and stolen.json()["metadata"]["error"]["code"] == "not_found"
        nowhere = http.post(
            f"/messages/?session_id={uuid.uuid4().hex}", json=tool_call("x", LIST_BOB), headers=bearer(zed)
        )
        assert nowhere.status_code == 404
        said = [{**response.json()["metadata"]["error"], "request_id": ""} for response in (nowhere, stolen)]
        assert said[0] == said[1]  # the same answer: no hint whether the session exists
        # the transport reads the last session_id of a query: zed's own session named first changes nothing
        zed_session = SseSession(http, zed_opened, zed)
        double = f"{zed_session.endpoint}&{session.endpoint.partition('?')[2]}"
        assert http.post(double, json=tool_call("stolen-2", LIST_BOB), headers=bearer(zed)).status_code == 404
        assert http.post(session.endpoint, json=tool_call("anonymous", LIST_BOB)).status_code == 401

        own = session.call("own", LIST_BOB)  # the opener's own messages still work
        assert "5c2e" in json.dumps(own)
        assert "stolen" not in session.replied and "stolen-2" not in session.replied


def test_revoking_the_opener_ends_its_sse_session(serve: ServeFn, tmp_path: Path) -> None:
    """Once the service refuses the opener's key, its messages are refused (401 for its own key, 404 for any
    other) and the session's stream ends."""
    keys = tmp_path / "data" / "auth" / "keys.json"
    record, opener = create_key(keys, workspaces=["bob"], scope="write")
    _, other = create_key(keys, workspaces=["bob"], scope="write")
    with serve() as client, client.stream("GET", "/sse", headers=bearer(opener), timeout=10) as opened:
        session = SseSession(client, opened, opener)
        session.initialize()
        assert session.call("before", LIST_BOB)["structuredContent"]["success"] is True
        revoke_key(keys, record.id)
        until_sync(lambda: client.post("/vector_store", json=LIST_BOB, headers=bearer(opener)).status_code == 401)
        assert session.post(tool_call("after", LIST_BOB)).status_code == 401
        assert session.post(tool_call("other", LIST_BOB), key=other).status_code == 404
        left = list(session.lines)  # returns only because the stream ended (else the read times out)
        assert not any('"after"' in line or '"other"' in line for line in left)


def test_streamable_http_keeps_no_session_another_key_could_drive(serve: ServeFn, tmp_path: Path) -> None:
    """`/mcp` is stateless: no `mcp-session-id` is handed out, every request runs as the key it carries (naming a
    session changes nothing), no `GET` stream outlives a key; a revoked key's next request is a 401."""
    keys = tmp_path / "data" / "auth" / "keys.json"
    record, admin = create_key(keys, workspaces=["*"], scope="admin")
    _, zed = create_key(keys, workspaces=["zed"], scope="read")
    accept = {"accept": "application/json, text/event-stream"}
    with serve() as client:
        opened = client.post("/mcp", json=INITIALIZE, headers={**bearer(admin), **accept})
        assert opened.status_code == 200 and "mcp-session-id" not in opened.headers
        assert opened.json()["result"]["serverInfo"]["name"] == "ReMe"
        named = {**bearer(zed), **accept, "mcp-session-id": uuid.uuid4().hex}
        called = client.post("/mcp", json=tool_call("stolen", LIST_BOB), headers=named)
        assert called.status_code == 200, called.text
        result = called.json()["result"]
        assert result["isError"] and result["structuredContent"]["metadata"]["error"]["code"] == "forbidden"
        # and no stream to hold open: `GET /mcp` (server-initiated messages, none here) is the spec's 405
        assert client.get("/mcp", headers={**bearer(admin), "accept": "text/event-stream"}).status_code == 405
        revoke_key(keys, record.id)
        until_sync(lambda: client.post("/mcp", json=INITIALIZE, headers={**bearer(admin), **accept}).status_code == 401)
