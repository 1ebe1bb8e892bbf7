"""The input schema of an MCP tool, in the shape LLM tool bridges read: one JSON type per property.

ReMe's own MCP client (flowllm's `FastMcpClient.list_tool_calls`) turns each top-level property into a model
that takes `type` as exactly one of string, array, integer, number, boolean or object, `enum` as a list of
strings, `items` as an object and `required` as a boolean; one property it cannot read aborts the whole list.
Many other bridges copy the schema into an LLM's tool spec as it is and have the same limits.

`tool_input_schema` therefore goes beyond `flat_schema.flatten` (references inlined), at every depth:

- a type list keeps its first non-null type (`["integer", "null"]` → `"integer"`, `["string", "array"]` →
  `"string"`); keywords of the types dropped go with them (`items` of a string), a `null` default and a `None`
  in an `enum` are removed. A nullable field is never in `required`, so it stays optional and the server still
  applies its default when it is left out;
- an `enum` of other values than strings becomes a line of the description (`one of: 1, 2`);
- a `required` list of an object-typed top-level property is left out (that key is a boolean there); the
  server still validates the nested fields with the flow's request model.

Bounds, lengths, patterns, descriptions and defaults stay where they were. The server validates arguments with
the request model, so what the schema no longer says (a field also accepting a list) is still accepted.
"""

from __future__ import annotations

from typing import Any

from reme_service.schema.flat_schema import flatten

# keywords that belong to one JSON type only; dropped with that type
_TYPE_KEYWORDS: dict[str, tuple[str, ...]] = {
    "array": ("items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains"),
    "object": ("properties", "required", "additionalProperties", "patternProperties", "minProperties",
               "maxProperties"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "integer": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}  # fmt: skip


def tool_input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (a JSON schema of an object, e.g. a pydantic model's) flattened to one type per property: see
    the module docstring. The result has `type: object` and a `properties` mapping, even when empty."""
    flat: dict[str, Any] = _single_types(flatten(schema))
    flat.pop("title", None)
    flat["type"] = "object"
    properties: dict[str, Any] = flat.setdefault("properties", {})
    for prop in properties.values():
        if isinstance(prop, dict) and isinstance(prop.get("required"), list):
            prop.pop("required")
    return flat


def _single_types(node: Any) -> Any:
    if isinstance(node, list):
        return [_single_types(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _single_types(value) for key, value in node.items()}
    kinds = out.get("type")
    if isinstance(kinds, list):
        chosen = next((kind for kind in kinds if kind != "null"), "string")
        for dropped in kinds:
            if dropped not in (chosen, "null"):
                for keyword in _TYPE_KEYWORDS.get(dropped, ()):
                    if keyword not in _TYPE_KEYWORDS.get(chosen, ()):
                        out.pop(keyword, None)
        out["type"] = chosen
        if "default" in out and out["default"] is None:
            del out["default"]
    if isinstance(out.get("enum"), list):
        values = [value for value in out["enum"] if value is not None]
        if all(isinstance(value, str) for value in values):
            out["enum"] = values
        else:
            del out["enum"]
            listed = "one of: " + ", ".join(str(value) for value in values)
            out["description"] = f"{out['description']} ({listed})" if out.get("description") else listed
    return out
