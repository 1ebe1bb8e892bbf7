"""Request bodies of the flow endpoints: JSON text → the flow's request model, off the event loop when large.

FastAPI would parse and validate a body on the event loop; a 100,000-message `summary_working_memory` body takes
about a second of that, during which no other client is answered. So the flow endpoints read the raw body and
call `decode_body`: at most `offload_bytes` of JSON are decoded in place (a thread hop costs more than a small
body), a larger body in a worker thread. The answers are FastAPI's own: malformed JSON and schema errors are
raised as `fastapi.exceptions.RequestValidationError` with the locations FastAPI gives (`("body", ...)`), so
`http_errors` turns them into the same 400 / 422 as before.

One difference from FastAPI, on purpose: the body is read as JSON whatever the `Content-Type` says. `curl -d`
sends `application/x-www-form-urlencoded` unless told otherwise; FastAPI then validated the raw bytes and
answered a puzzling 422, here the JSON the client meant is read (and a body that is not JSON gets the 400 for
malformed JSON).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, TypeVar

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def _parse(raw: bytes) -> Any:
    if not raw.strip():
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    try:
        return json.loads(raw)  # the stdlib parser, as FastAPI: big integers reach the model's own 422
    except UnicodeDecodeError as exc:
        error = {"type": "json_invalid", "loc": ("body", exc.start), "msg": "JSON decode error", "input": {}}
        raise RequestValidationError([{**error, "ctx": {"error": "the body is not UTF-8"}}]) from None
    except json.JSONDecodeError as exc:
        error = {"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error", "input": {}}
        raise RequestValidationError([{**error, "ctx": {"error": exc.msg}}]) from None
    except RecursionError:
        error = {"type": "json_invalid", "loc": ("body", 0), "msg": "JSON decode error", "input": {}}
        raise RequestValidationError([{**error, "ctx": {"error": "nested too deeply"}}]) from None


def _decode(raw: bytes, model: type[M]) -> M:
    data = _parse(raw)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


async def decode_body(raw: bytes, model: type[M], *, offload_bytes: int) -> M:
    """Validate `raw` as `model`; in a worker thread when it is longer than `offload_bytes`."""
    if len(raw) <= offload_bytes:
        return _decode(raw, model)
    return await asyncio.to_thread(_decode, raw, model)
