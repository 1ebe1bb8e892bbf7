"""JSON schemas without references: what MCP hosts and LLM tool bridges can read.

Pydantic writes `$defs` with `$ref`s to them, and `anyOf: [{...}, {"type": "null"}]` for optional fields. Several
MCP-to-LLM bridges (ReMe's working-memory agent among them) copy a tool's schema into an LLM tool spec as it is:
the `$ref` then dangles, and an `anyOf` hides the type, so every parameter turns into a required string.
`flatten` inlines every reference and writes a nullable field as a type list (`"type": ["integer", "null"]`),
keeping the constraints (bounds, lengths, patterns, enums) on the field itself.
"""

from __future__ import annotations

from typing import Any


def flatten(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` with its `$defs` inlined and nullable `anyOf`s merged into type lists."""
    definitions = dict(schema.get("$defs", {}))
    flat = _inline({k: v for k, v in schema.items() if k != "$defs"}, definitions, ())
    assert isinstance(flat, dict)
    return flat


def _inline(node: Any, definitions: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, definitions, seen) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        if name in seen:  # a recursive model: stop at an open object rather than loop
            return {"type": "object"}
        target = _inline(definitions[name], definitions, (*seen, name))
        extra = {k: _inline(v, definitions, seen) for k, v in node.items() if k != "$ref"}
        return {**target, **extra}
    out = {key: _inline(value, definitions, seen) for key, value in node.items()}
    return _merge_nullable(out)


def _merge_nullable(node: dict[str, Any]) -> dict[str, Any]:
    """`anyOf` branches that each have a plain `type` and no clashing keywords become one node with a type list
    (`{"type": ["string", "array", "null"], "items": ...}`); anything else is left as it is."""
    options = node.get("anyOf")
    if not isinstance(options, list) or not all(isinstance(option, dict) for option in options):
        return node
    types: list[str] = []
    merged: dict[str, Any] = {}
    for option in options:
        kind = option.get("type")
        kinds = [kind] if isinstance(kind, str) else kind
        if not isinstance(kinds, list) or "anyOf" in option:
            return node
        types += [k for k in kinds if k not in types]
        for key, value in option.items():
            if key == "type":
                continue
            if key in merged and merged[key] != value:
                return node  # two branches constrain the same keyword differently: keep them apart
            merged[key] = value
    if len(types) < 2:
        return node
    out = {**merged, **{k: v for k, v in node.items() if k != "anyOf"}, "type": types}
    if "enum" in out and "null" in types and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out
