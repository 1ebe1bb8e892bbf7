"""The MCP adapter: the memory tools (`mcp_memory.py`) and every flow as a tool (`mcp_tools.py`), served over stdio,
SSE or streamable HTTP.

```
reme                                                       # HTTP, with MCP at /mcp and /sse on the same port
reme backend=mcp mcp.transport=stdio                       # for desktop hosts that spawn the server
reme backend=mcp mcp.transport=sse mcp.port=8002           # GET /sse, POST /messages/?session_id=...
reme backend=mcp mcp.transport=streamable-http             # POST /mcp (stateless, JSON replies, no GET stream)
```

Built on the official SDK's low-level `Server` so each tool's schema can be the flow's own request schema
(FastMCP derives schemas from Python signatures, which generated flows do not have). The HTTP transports also
answer `GET /health`. Loopback hosts get the SDK's DNS-rebinding protection (Host and Origin checked), and
`/health` the HTTP service's `OriginGuard`. Behind
`AuthGate`, an SSE session is bound to the key that opened it and ends when that key is revoked
(`mcp_sessions.py`); streamable HTTP keeps no session, so each request runs as its own key.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal

import orjson
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.sse import SseServerTransport
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from reme_service.auth.access import is_loopback
from reme_service.server.auth_gate import AuthGate
from reme_service.server.mcp_body import StrictJsonBody
from reme_service.server.mcp_memory import MemoryTools
from reme_service.server.mcp_sdk import new_server
from reme_service.server.mcp_sessions import SseSessions
from reme_service.server.mcp_tools import call_flow, tool_for
from reme_service.server.origin_guard import OriginGuard, OriginPolicy, host_patterns
from reme_service.version import __version__

if TYPE_CHECKING:
    from reme_service.app import ReMeApp

logger = logging.getLogger("reme_service.mcp")

HttpTransport = Literal["sse", "streamable-http", "http"]
SERVER_NAME = "ReMe"
INSTRUCTIONS = (
    "Memory for agents. Pass workspace_id to choose the memory space (one per user or per task family). "
    "add_memory, search_memories, get_memory, update_memory, delete_memory and list_memories keep single memories. "
    "ReMe's flows: retrieve before acting (retrieve_*), summarise after (summary_*); a flow's structured content is "
    "the full response: answer, success and metadata (memory_list, update_result, ...)."
)


def build_mcp_server(app: ReMeApp) -> Server[Any, Any]:
    """A low-level MCP server whose tools are the memory tools (`mcp_memory.py`) and `app.flows`, listed and called
    at request time. A flow of the same name as a memory tool is hidden by it."""
    memory = MemoryTools(app)

    async def list_tools() -> list[types.Tool]:
        flows = [tool_for(runner) for name, runner in app.flows.items() if name not in memory]
        return [*memory.tools(), *flows]

    # Arguments are validated by the tool's pydantic model (errors name the field), not by the SDK's jsonschema.
    async def call_tool(name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        if name in memory:
            return await memory.call(name, arguments)
        return await call_flow(app, name, arguments)

    return new_server(
        SERVER_NAME, version=__version__, instructions=INSTRUCTIONS, list_tools=list_tools, call_tool=call_tool
    )


async def serve_stdio(app: ReMeApp) -> None:
    """Run the MCP server on this process's stdin/stdout until the client closes them."""
    server = build_mcp_server(app)
    async with app, stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _security(host: str, extra_hosts: list[str], origins: list[str]) -> TransportSecuritySettings | None:
    """DNS-rebinding protection for a server on loopback: only the Host names that reach it from this machine.

    The list is `origin_guard.host_patterns`, the same the HTTP routes check: the loopback names on any port,
    `0.0.0.0:*` among them (every ReMe MCP example connects to `http://0.0.0.0:8002/sse/`, which reaches a local
    server, and a browser cannot be made to send it by a rebinding domain), plus `http.allowed_hosts` and
    `mcp.allowed_hosts`. `origins` (`http.cors_origins`) are accepted besides `http://` each of those names."""
    if not is_loopback(host):
        return None  # bound to a routable address on purpose: Host checks would only get in the way (keys guard it)
    hosts = host_patterns(extra_hosts)
    allowed_origins = [f"http://{name}" for name in hosts] + [origin for origin in origins if origin != "*"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=allowed_origins
    )


class _AsgiEndpoint:
    """Wraps an ASGI callable so Starlette's `Route` passes it scope/receive/send instead of a `Request`."""

    def __init__(self, handler: ASGIApp) -> None:
        self._handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._handler(scope, receive, send)


class McpEndpoints:
    """MCP's HTTP transports as routes: SSE (`GET /sse`, `POST /messages/`) and stateless streamable HTTP
    (`/mcp`). `create_mcp_http_app` serves them alone; the HTTP app mounts both (`mcp.mount`). Whoever serves them
    runs `lifespan()` while serving (the streamable transport's task group)."""

    def __init__(self, app: ReMeApp, transports: tuple[HttpTransport, ...], *, host: str) -> None:
        server = build_mcp_server(app)
        config = app.config
        security = _security(host, [*config.http.allowed_hosts, *config.mcp.allowed_hosts], config.http.cors_origins)
        self.routes: list[Route | Mount] = []
        self._session_manager: StreamableHTTPSessionManager | None = None
        for transport in transports:
            if transport == "sse":
                sse = SseServerTransport("/messages/", security_settings=security)
                self.routes += _sse_routes(SseSessions(server, sse, app.access))
            elif transport in ("streamable-http", "http"):
                # Stateless, with plain JSON replies: every tool call is one request and one response (no
                # server-initiated messages), so per-client sessions and SSE streams would only hold state — and
                # the SDK's SSE mode leaves its memory streams unclosed when a client disconnects.
                self._session_manager = StreamableHTTPSessionManager(
                    app=server, json_response=True, stateless=True, security_settings=security
                )
                # No `GET /mcp`: a stateless transport has nothing to send on it, and the stream would stay open
                # for as long as the client liked, its key revoked or not; 405 is the spec's "no stream here".
                handler = _AsgiEndpoint(StrictJsonBody(self._session_manager.handle_request))
                self.routes.append(Route("/mcp", handler, methods=["POST", "DELETE"]))
            else:
                raise ValueError(f"unknown MCP HTTP transport {transport!r}; valid: sse, streamable-http")

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        if self._session_manager is None:
            yield
            return
        async with self._session_manager.run():
            yield


def _sse_routes(sessions: SseSessions) -> list[Route | Mount]:
    return [
        Route("/sse", _AsgiEndpoint(sessions.open), methods=["GET"]),
        Route("/sse/", _AsgiEndpoint(sessions.open), methods=["GET"]),  # ReMe's examples use the trailing slash
        Mount("/messages/", StrictJsonBody(sessions.post)),
    ]


def create_mcp_http_app(app: ReMeApp, transport: HttpTransport, *, manage_lifecycle: bool = True) -> Starlette:
    """The ASGI app of one HTTP transport alone (`backend=mcp`). With `manage_lifecycle`, its lifespan starts and
    stops `app`."""
    endpoints = McpEndpoints(app, (transport,), host=app.config.mcp.host)

    config = app.config
    # The transports have the SDK's transport security; `/health` gets the HTTP service's check of Host and Origin
    # (`OriginGuard`), so a DNS-rebinding page cannot read it either.
    policy = OriginPolicy.of(
        config.mcp.host, [*config.http.allowed_hosts, *config.mcp.allowed_hosts], config.http.cors_origins
    )

    async def health(scope: Scope, receive: Receive, send: Send) -> None:
        answer = Response(orjson.dumps(await app.health()), media_type="application/json")
        await answer(scope, receive, send)

    routes = [*endpoints.routes, Route("/health", _AsgiEndpoint(OriginGuard(health, policy)), methods=["GET"])]

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if manage_lifecycle:
            await app.start()
        try:
            async with endpoints.lifespan():
                yield
        finally:
            if manage_lifecycle:
                await app.stop()

    return Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(AuthGate, access=app.access)])


def run_mcp(app: ReMeApp) -> None:
    """Serve `app` over the transport in `app.config.mcp` until interrupted (the `reme backend=mcp` entry)."""
    import anyio

    cfg = app.config.mcp
    if cfg.transport == "stdio":
        anyio.run(serve_stdio, app)
        return
    import uvicorn

    path = "/sse" if cfg.transport == "sse" else "/mcp"
    logger.info("serving %d flows as MCP tools on http://%s:%d%s", len(app.flows), cfg.host, cfg.port, path)
    uvicorn.run(
        create_mcp_http_app(app, cfg.transport),
        host=cfg.host,
        port=cfg.port,
        log_level=app.config.log_level.lower(),
        access_log=app.config.http.access_log,
        log_config=None,  # keep the service's logging (`observe/logs.py`), text or JSON
    )
