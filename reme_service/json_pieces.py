"""Dump and encode a large answer in pieces, so that the thread doing it lets the event loop run in between.

Moving work to a worker thread frees the event loop only while that work gives up the GIL now and then. Python
code does (every switch interval); one call into pydantic-core or orjson does not: `model_dump(mode="json")` of an
answer of 100,000 memories is one call of ~0.3-0.8 s, and the loop waits for the GIL all that time. `json_ready`
and `encode` give the same result as the single call, made of calls of at most `CHUNK` list items each (~1 ms).
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, TypeAdapter

#: list items dumped or encoded per call
CHUNK = 500
_ANY: TypeAdapter[Any] = TypeAdapter(Any)


def model_json_ready(model: BaseModel) -> dict[str, Any]:
    """`model.model_dump(mode="json")` of a model whose fields are plain (no aliases, no custom serialisers, as
    `FlowResponse`), field by field and in pieces."""
    return {name: json_ready(getattr(model, name)) for name in type(model).model_fields}


def json_ready(value: object, depth: int = 3) -> Any:
    """What a field typed `Any` dumps `value` to in JSON mode, in pieces: long lists `CHUNK` items at a time, dicts
    with string keys value by value (`depth` levels deep)."""
    if depth > 0 and isinstance(value, dict) and all(type(key) is str for key in value):
        return {key: json_ready(item, depth - 1) for key, item in value.items()}
    if isinstance(value, list | tuple) and len(value) > CHUNK:
        out: list[Any] = []
        for start in range(0, len(value), CHUNK):
            out.extend(_ANY.dump_python(list(value[start : start + CHUNK]), mode="json"))
        return out
    return _ANY.dump_python(value, mode="json")


def encode(value: object, depth: int = 3) -> bytes:
    """`orjson.dumps(value)`, byte for byte, in pieces: long lists `CHUNK` items at a time, dicts with string keys
    value by value (`depth` levels deep)."""
    if depth > 0 and isinstance(value, dict) and value and all(type(key) is str for key in value):
        parts = [orjson.dumps(key) + b":" + encode(item, depth - 1) for key, item in value.items()]
        return b"{" + b",".join(parts) + b"}"
    if isinstance(value, list) and len(value) > CHUNK:
        chunks = [orjson.dumps(value[start : start + CHUNK])[1:-1] for start in range(0, len(value), CHUNK)]
        return b"[" + b",".join(chunks) + b"]"
    return orjson.dumps(value)
