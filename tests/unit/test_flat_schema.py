"""MCP tool schemas are flat and self-contained: no `$ref`/`$defs`, numbers typed as numbers (ReMe's MCP-to-LLM
bridge copies them as they are). `flatten` writes nullable fields as type lists; the tools then keep one type per
property (tests/unit/test_tool_schema.py)."""

from __future__ import annotations

import json
from typing import Any

from reme_service.app import ReMeApp
from reme_service.schema.flat_schema import flatten
from reme_service.server.mcp_tools import tool_for


def walk(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found += walk(value)
    elif isinstance(node, list):
        for value in node:
            found += walk(value)
    return found


def test_every_tool_schema_is_flat() -> None:
    app = ReMeApp("embedding_model.default.backend=hash", env={})
    for runner in app.flows.values():
        schema = tool_for(runner).inputSchema
        text = json.dumps(schema)
        assert "$ref" not in text and "$defs" not in text, runner.name
        for node in walk(schema):
            assert {"type": "null"} not in node.get("anyOf", []), (runner.name, node)
    retrieve = tool_for(app.flows["retrieve_task_memory"]).inputSchema["properties"]
    assert retrieve["top_k"]["type"] == "integer" and retrieve["top_k"]["minimum"] == 1
    assert retrieve["query"]["type"] == "string"
    summary = tool_for(app.flows["summary_task_memory"]).inputSchema["properties"]["trajectories"]
    assert summary["type"] == "array" and summary["items"]["type"] == "object"
    assert "messages" in summary["items"]["properties"]


def test_flatten_inlines_references_and_stops_at_recursion() -> None:
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"child": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
            },
            "Kind": {"enum": ["a", "b"], "type": "string"},
        },
        "type": "object",
        "properties": {
            "root": {"$ref": "#/$defs/Node"},
            "kind": {"anyOf": [{"$ref": "#/$defs/Kind"}, {"type": "null"}], "default": None},
        },
    }
    flat = flatten(schema)
    assert "$defs" not in flat
    assert flat["properties"]["kind"] == {"enum": ["a", "b", None], "type": ["string", "null"], "default": None}
    child = flat["properties"]["root"]["properties"]["child"]
    assert child == {"type": ["object", "null"]}  # the recursion stops at an open object
