"""Flows as MCP tools: one tool per flow, named after it, with the flow's full request schema.

ReMe advertised only the declared `input_schema` (so `workspace_id` was accepted but invisible) and returned
only `answer` as text (so `metadata` — memory lists, update results — was lost). Here a tool's input schema is the
JSON schema of the flow's request model (base fields included) and a result carries:

- `content`: one text block holding the `answer` (JSON-encoded when the answer is not a string);
- `structuredContent`: the whole response envelope `{"answer", "success", "metadata"}`.

A failure is a tool error (`isError: true`) whose text is the service's message and whose structured content is
the error envelope (code, message, request id). Arguments are validated with the same pydantic model as HTTP,
so a wrong type is reported with the field's name.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

import orjson
from mcp import types
from pydantic import BaseModel, ValidationError

from reme_service.errors import (
    NotFoundError,
    ReMeError,
    RequestValidationError,
    describe_validation_errors,
    error_envelope,
)

if TYPE_CHECKING:
    from reme_service.app import ReMeApp
    from reme_service.flow.runner import FlowRunner
    from reme_service.ops.common.context import ServiceContext
from reme_service.schema.tool_schema import tool_input_schema

logger = logging.getLogger("reme_service.mcp")

# The response envelope every flow returns; advertised so clients can validate `structuredContent`.
RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"description": "the flow's answer: text, or a JSON value for some flows"},
        "success": {"type": "boolean", "description": "true when the flow completed"},
        "metadata": {
            "type": "object",
            "description": "flow results beyond the answer (memory_list, update_result, no_llm_ops, ...)",
        },
    },
    "required": ["answer", "success", "metadata"],
}


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A tool's input schema, from the pydantic model its arguments are validated with: every tool's (the flows'
    and the memory tools' of `mcp_memory.py`) is made here, self-contained (no `$ref`: hosts copy it as is) and
    with one JSON type per property (`schema/tool_schema.py`: what ReMe's own MCP client reads)."""
    return tool_input_schema(model.model_json_schema(mode="validation"))


def tool_for(runner: FlowRunner[ServiceContext]) -> types.Tool:
    """The MCP tool of one flow: its name, description, request schema (`input_schema`) and the response schema."""
    schema = input_schema(runner.request_model)
    schema["properties"].pop("async", None)  # HTTP only (jobs): a tool call always waits for its result
    return types.Tool(
        name=runner.name,
        description=runner.description or runner.name,
        inputSchema=schema,
        outputSchema=RESPONSE_SCHEMA,
    )


def answer_text(answer: Any) -> str:
    """The text block of a result: the answer itself, or its JSON when it is not a string."""
    if isinstance(answer, str):
        return answer
    return orjson.dumps(answer).decode()


def describe_validation_error(flow: str, exc: ValidationError) -> str:
    """One part per bad field: `field.path: message (got value)`."""
    return describe_validation_errors(
        exc, prefix=f"invalid arguments for tool '{flow}': ", no_loc="(arguments)", with_input=True
    )


def error_result(error: ReMeError, request_id: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=error.message)],
        structuredContent=error_envelope(error, request_id),
        isError=True,
    )


async def call_flow(app: ReMeApp, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
    """Validate `arguments` with the flow's request model, run the flow and wrap the response for MCP."""
    request_id = uuid.uuid4().hex[:16]
    runner = app.flows.get(name)
    if runner is None:
        unknown = NotFoundError(f"unknown tool {name!r}; available: {', '.join(sorted(app.flows))}")
        return error_result(unknown, request_id)
    try:
        request = runner.request_model.model_validate(arguments or {})
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        invalid = RequestValidationError(describe_validation_error(name, exc), details={"errors": errors})
        return error_result(invalid, request_id)
    try:
        status, payload = await app.run_validated(runner, request, request_id)
    except Exception as exc:  # noqa: BLE001 - an unexpected failure is still a tool error, never a crash
        logger.exception("[%s] tool %s failed", request_id, name)
        internal = ReMeError(f"internal error ({type(exc).__name__}); see the server log for request {request_id}")
        return error_result(internal, request_id)
    if status != 200 or not payload.get("success", False):
        message = payload.get("metadata", {}).get("error", {}).get("message", "the flow failed")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=message)], structuredContent=payload, isError=True
        )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=answer_text(payload.get("answer", "")))],
        structuredContent=payload,
        isError=False,
    )
