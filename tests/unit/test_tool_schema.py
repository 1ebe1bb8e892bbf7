"""Every MCP tool's input schema is one that ReMe's own MCP client reads.

flowllm's `FastMcpClient.list_tool_calls()` (what ReMe's working-memory agent gives its LLM) builds a `ToolCall`
per tool and a `ToolAttr` per top-level property; one property it cannot read aborts the whole list.
`ToolAttrRules` states the rules of `ToolAttr` (flowllm 0.2.0.x, `flowllm/core/schema/tool_call.py`) as this test
relies on them; `test_real_flowllm_reads_every_tool` checks the same tools with the real models where flowllm is
installed (it is not a test dependency: flowllm 0.2 requires mcp 2.x, the service runs on mcp 1.x).
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from reme_service.app import ReMeApp
from reme_service.schema.tool_schema import tool_input_schema
from reme_service.server.mcp_tools import tool_for


class ToolAttrRules(BaseModel):
    """One top-level property as flowllm's `ToolAttr` reads it: any other keys are allowed."""

    model_config = ConfigDict(extra="allow")

    type: Literal["string", "array", "integer", "number", "boolean", "object"] = "string"
    description: str = ""
    required: bool = True
    enum: list[str] | None = None
    items: dict[str, Any] = Field(default_factory=dict)


def _tools() -> dict[str, Any]:
    app = ReMeApp("embedding_model.default.backend=hash", env={})
    return {runner.name: tool_for(runner) for runner in app.flows.values()}


def _walk(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found += _walk(value)
    elif isinstance(node, list):
        for value in node:
            found += _walk(value)
    return found


def test_every_property_of_every_tool_is_one_flowllm_reads() -> None:
    tools = _tools()
    assert len(tools) >= 19  # ReMe lists 19
    for name, tool in tools.items():
        schema = tool.inputSchema
        assert isinstance(schema["properties"], dict), name  # the client indexes it without a default
        for field, spec in schema["properties"].items():
            ToolAttrRules.model_validate(spec)  # raises, naming the field, as the client would
            assert spec.get("type") is not None, (name, field)
        for node in _walk(schema):  # nested schemas too: no type lists, anyOf or references anywhere
            assert not isinstance(node.get("type"), list), (name, node)
            assert not {"anyOf", "oneOf", "$ref", "$defs"} & set(node), (name, node)


def test_nullable_fields_are_optional_with_their_default_and_keep_bounds() -> None:
    tools = _tools()
    retrieve = tools["retrieve_task_memory"].inputSchema
    top_k = retrieve["properties"]["top_k"]
    assert top_k["type"] == "integer" and (top_k["minimum"], top_k["maximum"]) == (1, 50)
    assert top_k["description"] and "top_k" not in retrieve.get("required", [])
    assert retrieve["properties"]["query"]["type"] == "string"
    language = tools["summary_personal_memory"].inputSchema["properties"]["language"]
    assert language["type"] == "string" and language["enum"] == ["", "en", "zh"]  # None left out of the enum
    tool_names = tools["summary_tool_memory"].inputSchema["properties"]["tool_names"]
    assert tool_names["type"] == "string" and "items" not in tool_names  # ReMe's declared type: comma-separated


def test_the_rules_apply_to_any_schema_given() -> None:
    """New tools get the same shape: non-string enums, object properties with `required` lists, null defaults."""
    schema = {
        "type": "object",
        "title": "Anything",
        "properties": {
            "level": {"anyOf": [{"enum": [1, 2], "type": "integer"}, {"type": "null"}], "default": None,
                      "description": "how deep"},
            "filter": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
            "ids": {"anyOf": [{"type": "array", "items": {"type": "string"}, "maxItems": 5}, {"type": "null"}]},
        },
    }  # fmt: skip
    flat = tool_input_schema(schema)
    assert flat["properties"]["level"] == {"type": "integer", "description": "how deep (one of: 1, 2)"}
    assert "required" not in flat["properties"]["filter"] and flat["properties"]["filter"]["type"] == "object"
    assert flat["properties"]["ids"] == {"type": "array", "items": {"type": "string"}, "maxItems": 5}
    for spec in flat["properties"].values():
        ToolAttrRules.model_validate(spec)
    assert tool_input_schema({"type": "object"})["properties"] == {}


def test_real_flowllm_reads_every_tool() -> None:
    tool_call = pytest.importorskip(
        "flowllm.core.schema.tool_call",
        reason="flowllm (ReMe's engine) is not installed: it requires mcp>=2, and the test extra holds mcp<1.30 "
        "for AgentScope 1.x (the core takes either); ToolAttrRules above states its rules",
    )
    calls = [tool_call.ToolCall.from_mcp_tool(tool) for tool in _tools().values()]
    assert len(calls) >= 19
    top_k = next(call for call in calls if call.name == "retrieve_task_memory").input_schema["top_k"]
    assert top_k.type == "integer"  # (flowllm marks every property required: its quirk, not the schema)
