"""The MCP server, driven by the official MCP client over stdio, SSE and streamable HTTP.

Each transport gets the same checks: the tool list is the flow list with each flow's full request schema
(`workspace_id` included), a call's structured content is the whole response and its text is the answer, a failing
flow is a tool error with the service's message, and a wrongly typed argument is a tool error naming the field.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from reme_service.app import ReMeApp
from reme_service.server.http import create_http_app
from reme_service.server.mcp import HttpTransport, create_mcp_http_app
from reme_service.testing.ports import free_port
from reme_service.testing.serve import serve_in_thread
from tests.fakes.service_process import service_process

pytestmark = [pytest.mark.service, pytest.mark.own_backend]  # its own store in every pass

BASE_FIELDS = {"workspace_id", "query", "messages", "metadata"}
MEMORIES = [
    {"when_to_use": "book a flight ticket", "content": "compare prices before booking", "score": 0.9},
    {"when_to_use": "send an email to a contact", "content": "look the contact up first", "score": 0.5},
]

Connect = Callable[[], AbstractAsyncContextManager[ClientSession]]


def _text(result: CallToolResult) -> str:
    """The text of a tool result's one content block (the service answers with a single text block)."""
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


def _app_args(tmp_path: Path) -> list[str]:
    return [f"data_dir={tmp_path / 'data'}", "embedding_model.default.backend=hash"]


def _child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("FLOW_")}


@asynccontextmanager
async def _session(streams: Any) -> AsyncIterator[ClientSession]:
    read_stream, write_stream = streams[0], streams[1]
    async with ClientSession(read_stream, write_stream) as session:
        await session.initialize()
        yield session


def _connect_stdio(tmp_path: Path) -> Connect:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "reme_service", "backend=mcp", "mcp.transport=stdio", *_app_args(tmp_path)],
        env=_child_env(),
        cwd=str(tmp_path),
    )

    @asynccontextmanager
    async def connect() -> AsyncIterator[ClientSession]:
        with (tmp_path / "stdio-server.log").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as streams, _session(streams) as session:
                yield session

    return connect


def _connect_http(base_url: str, transport: str) -> Connect:
    @asynccontextmanager
    async def connect() -> AsyncIterator[ClientSession]:
        if transport == "sse":
            async with sse_client(f"{base_url}/sse") as streams, _session(streams) as session:
                yield session
        else:
            async with (
                httpx.AsyncClient(timeout=30) as http,
                streamable_http_client(f"{base_url}/mcp", http_client=http) as streams,
                _session(streams) as session,
            ):
                yield session

    return connect


@pytest.fixture(params=["stdio", "sse", "streamable-http", "http+sse", "http+streamable-http"])
def connect(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Each transport alone (`backend=mcp`), and both mounted on the HTTP service (`http+...`, `mcp.mount`)."""
    transport: str = request.param
    monkeypatch.chdir(tmp_path)
    if transport == "stdio":
        yield _connect_stdio(tmp_path)
        return
    app = ReMeApp(*_app_args(tmp_path), env={})
    if transport.startswith("http+"):
        transport = transport.removeprefix("http+")
        served: Any = create_http_app(app)
    else:
        served = create_mcp_http_app(app, transport)  # type: ignore[arg-type]
    with serve_in_thread(served) as base_url:
        yield _connect_http(base_url, transport)


def _expected_flows(tmp_path: Path) -> dict[str, Any]:
    """Each enabled flow's config (description and declared input schema)."""
    app = ReMeApp(*_app_args(tmp_path), env={})
    return {name: app.config.flow[name] for name in app.flows}


@pytest.mark.anyio
async def test_tools_are_the_flows_with_full_schemas(connect: Connect, tmp_path: Path) -> None:
    flows = _expected_flows(tmp_path)
    async with connect() as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    memory_tools = {"add_memory", "search_memories", "get_memory", "update_memory", "delete_memory", "list_memories"}
    assert set(tools) == set(flows) | memory_tools  # the memory tools: tests/service/test_mcp_memory.py
    for name, flow in flows.items():
        tool = tools[name]
        assert tool.description == flow.description
        properties = tool.inputSchema["properties"]
        # every field the flow accepts is advertised: the base fields and each declared one, with its description
        assert BASE_FIELDS | set(flow.input_schema) <= set(properties), name
        for field, spec in flow.input_schema.items():
            assert properties[field].get("description") == (spec.description or None), (name, field)
        required = {f for f, spec in flow.input_schema.items() if spec.required}
        assert set(tool.inputSchema.get("required", [])) == required, name
        assert tool.outputSchema is not None and set(tool.outputSchema["required"]) == {"answer", "success", "metadata"}
    assert "async" not in tools["summary_task_memory"].inputSchema["properties"]  # jobs are HTTP's; a tool call waits
    top_k = tools["retrieve_task_memory"].inputSchema["properties"]["top_k"]
    assert top_k["type"] == "integer"  # one type per property, no $ref (tests/unit/test_tool_schema.py)
    assert "top_k" not in tools["retrieve_task_memory"].inputSchema.get("required", [])
    assert (top_k["minimum"], top_k["maximum"]) == (1, 50)


@pytest.mark.anyio
async def test_call_returns_full_response_and_answer_text(connect: Connect) -> None:
    async with connect() as session:
        stored = await session.call_tool(
            "vector_store", {"workspace_id": "mcp_ws", "action": "insert", "memory_dicts": MEMORIES}
        )
        assert stored.isError is False
        assert stored.structuredContent is not None
        assert stored.structuredContent["success"] is True
        # metadata survives (ReMe's MCP server returned only the answer text and lost it)
        assert len(stored.structuredContent["metadata"]["action_result"]["memory_ids"]) == 2

        result = await session.call_tool(
            "retrieve_task_memory", {"workspace_id": "mcp_ws", "query": "I need to book a flight", "top_k": 1}
        )
        assert result.isError is False
        body = result.structuredContent
        assert body is not None and body["success"] is True
        memories = body["metadata"]["memory_list"]
        assert [m["when_to_use"] for m in memories] == ["book a flight ticket"]
        assert len(result.content) == 1
        assert result.content[0].type == "text"
        assert _text(result) == body["answer"]
        assert "compare prices before booking" in body["answer"]

        # another workspace sees nothing: workspace_id is honoured, not silently dropped
        other = await session.call_tool("retrieve_task_memory", {"workspace_id": "elsewhere", "query": "flight"})
        assert other.structuredContent is not None and other.structuredContent["metadata"]["memory_list"] == []


@pytest.mark.anyio
async def test_wrong_argument_type_is_a_tool_error_naming_the_field(connect: Connect) -> None:
    async with connect() as session:
        result = await session.call_tool("retrieve_task_memory", {"query": "flights", "top_k": "many"})
        assert result.isError is True
        text = _text(result)
        assert "top_k" in text and "integer" in text and "'retrieve_task_memory'" in text
        assert result.structuredContent is not None
        assert result.structuredContent["metadata"]["error"]["code"] == "validation_error"

        missing = await session.call_tool("retrieve_task_memory", {"workspace_id": "w"})
        assert missing.isError is True and "query" in _text(missing)

        nested = await session.call_tool(
            "vector_store", {"action": "insert", "memory_ids": "not-a-list", "memory_dicts": []}
        )
        assert nested.isError is True and "memory_ids" in _text(nested)


@pytest.mark.anyio
async def test_flow_failure_is_a_tool_error_with_the_service_message(connect: Connect) -> None:
    async with connect() as session:
        bad_action = await session.call_tool("vector_store", {"workspace_id": "w", "action": "explode"})
        assert bad_action.isError is True
        error = bad_action.structuredContent["metadata"]["error"]  # type: ignore[index]
        assert error["code"] == "invalid_request"
        assert _text(bad_action) == error["message"]
        assert "explode" in error["message"]

        bad_workspace = await session.call_tool("retrieve_task_memory", {"workspace_id": "../etc", "query": "x"})
        assert bad_workspace.isError is True and "workspace" in _text(bad_workspace)

        unknown = await session.call_tool("no_such_flow", {})
        assert unknown.isError is True and "unknown tool 'no_such_flow'" in _text(unknown)


def test_cli_serves_streamable_http_on_the_configured_port(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reme_service",
            "backend=mcp",
            "mcp.transport=streamable-http",
            "mcp.host=127.0.0.1",
            f"mcp.port={port}",
            *_app_args(tmp_path),
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_child_env(),
    )

    async def list_tools() -> set[str]:
        async with _connect_http(f"http://127.0.0.1:{port}", "streamable-http")() as session:
            return {tool.name for tool in (await session.list_tools()).tools}

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    proc.terminate()
                    raise AssertionError(proc.communicate(timeout=20)[1].decode()) from None
                time.sleep(0.1)
        assert health.json()["status"] == "healthy"
        assert "retrieve_task_memory" in anyio.run(list_tools)
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=20)
    assert "as MCP tools over streamable-http on 127.0.0.1:" in stderr.decode()


@pytest.mark.anyio
async def test_sse_at_the_address_every_reme_example_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ReMe's MCP examples connect to http://0.0.0.0:8002/sse/ (Host 0.0.0.0, trailing slash): not a 421."""
    monkeypatch.chdir(tmp_path)
    app = ReMeApp(*_app_args(tmp_path), env={})
    with serve_in_thread(create_mcp_http_app(app, "sse")) as base_url:
        port = base_url.rsplit(":", 1)[1]
        async with sse_client(f"http://0.0.0.0:{port}/sse/") as streams, _session(streams) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
        assert "retrieve_task_memory" in names
        async with httpx.AsyncClient(timeout=5) as client:  # a name that does not reach this machine stays refused
            refused = await client.get(f"{base_url}/sse/", headers={"Host": "evil.example:80"})
        assert refused.status_code == 421


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["sse", "streamable-http"])
async def test_the_standalone_health_route_refuses_rebinding_and_cross_site_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: HttpTransport
) -> None:
    """Served alone on loopback, `/health` answers the loopback names and no DNS-rebinding Host or foreign page, as
    the HTTP service's routes (`OriginGuard`)."""
    monkeypatch.chdir(tmp_path)
    app = ReMeApp(*_app_args(tmp_path), env={})
    with serve_in_thread(create_mcp_http_app(app, transport)) as base_url:
        port = base_url.rsplit(":", 1)[1]
        async with httpx.AsyncClient(timeout=5) as client:
            for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"0.0.0.0:{port}"):
                served = await client.get(f"{base_url}/health", headers={"Host": host})
                assert served.status_code == 200 and served.json()["status"] == "healthy", served.text
            rebound = await client.get(f"{base_url}/health", headers={"Host": f"evil.example:{port}"})
            foreign = await client.get(f"{base_url}/health", headers={"Origin": "https://evil.example"})
    assert rebound.status_code == 421, rebound.text
    assert rebound.json()["metadata"]["error"]["code"] == "misdirected_request"
    assert foreign.status_code == 403, foreign.text
    assert foreign.json()["metadata"]["error"]["code"] == "cross_origin"


@pytest.mark.anyio
async def test_an_mcp_host_uses_the_running_http_service(tmp_path: Path) -> None:
    """`reme` as started by a user: HTTP and MCP on one port, one process owning the local store — what MCP writes,
    HTTP reads, and the other way round (two processes on one local store are refused)."""
    with service_process(tmp_path, *_app_args(tmp_path)) as service:
        base_url = service.base_url
        async with _connect_http(base_url, "streamable-http")() as session:
            stored = await session.call_tool(
                "vector_store", {"workspace_id": "shared", "action": "insert", "memory_dicts": MEMORIES}
            )
            assert stored.isError is False
        async with httpx.AsyncClient(timeout=30) as http:
            found = await http.post(
                f"{base_url}/retrieve_task_memory", json={"workspace_id": "shared", "query": "flight", "top_k": 1}
            )
            assert found.json()["metadata"]["memory_list"][0]["when_to_use"] == "book a flight ticket"
            more = [{"when_to_use": "water the plants", "content": "twice a week"}]
            r = await http.post(
                f"{base_url}/vector_store", json={"workspace_id": "shared", "action": "insert", "memory_dicts": more}
            )
            assert r.json()["success"] is True
        async with _connect_http(base_url, "sse")() as session:
            result = await session.call_tool(
                "retrieve_task_memory", {"workspace_id": "shared", "query": "plants", "top_k": 1}
            )
        assert result.structuredContent is not None
        assert result.structuredContent["metadata"]["memory_list"][0]["content"] == "twice a week"
    assert "MCP at /mcp, /sse" in service.log()
