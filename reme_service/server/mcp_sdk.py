"""The one place that knows which major version of the MCP SDK is installed: `new_server` builds a low-level
`Server` with a tool lister and a tool caller on mcp 1.x and on mcp 2.x alike.

The core depends on `mcp>=1.20,<3`: the AgentScope 1.x extra needs an mcp below 1.30, and an app on mcp 2 must be
able to install the service beside its own. What differs between the two for this server is only how handlers are
registered — 1.x has decorators (`@server.list_tools()`, `@server.call_tool(validate_input=...)`), 2.x takes
`on_list_tools` / `on_call_tool` callables `(ctx, params)` in the constructor and never validates arguments itself.
The wire types (`mcp.types`, camelCase names accepted by both), the transports (`stdio_server`,
`SseServerTransport`, `StreamableHTTPSessionManager`) and `TransportSecuritySettings` are the same for us in both.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

from mcp import types
from mcp.server.lowlevel import Server

ListTools = Callable[[], Awaitable[list[types.Tool]]]
CallTool = Callable[[str, dict[str, Any] | None], Awaitable[types.CallToolResult]]


def sdk_major() -> int:
    """2 when the installed SDK registers handlers through the constructor (mcp 2.x), else 1."""
    return 2 if "on_call_tool" in inspect.signature(Server.__init__).parameters else 1


def new_server(
    name: str, *, version: str, instructions: str, list_tools: ListTools, call_tool: CallTool
) -> Server[Any, Any]:
    """A low-level server answering `tools/list` with `list_tools()` and `tools/call` with `call_tool(name,
    arguments)`. Arguments reach `call_tool` unvalidated (the flows validate them with their pydantic models, so
    errors name the field)."""
    if sdk_major() >= 2:
        return _server_v2(name, version, instructions, list_tools, call_tool)
    server: Server[Any, Any] = Server(name, version=version, instructions=instructions)

    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]  # the SDK's decorators are untyped
    async def _list_tools() -> list[types.Tool]:
        return await list_tools()

    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def _call_tool(tool: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        return await call_tool(tool, arguments)

    return server


def _server_v2(
    name: str, version: str, instructions: str, list_tools: ListTools, call_tool: CallTool
) -> Server[Any, Any]:
    """mcp 2.x: handlers as constructor arguments, each taking the request context and the request's params. Typed
    loosely: the type checker sees the 1.x SDK the tests install."""

    async def on_list_tools(_ctx: Any, _params: Any) -> Any:
        return types.ListToolsResult(tools=await list_tools())

    async def on_call_tool(_ctx: Any, params: Any) -> types.CallToolResult:
        return await call_tool(params.name, params.arguments)

    factory = cast(Any, Server)
    server = factory(
        name, version=version, instructions=instructions, on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )
    return cast("Server[Any, Any]", server)
