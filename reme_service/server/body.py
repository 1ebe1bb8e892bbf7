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

from reme_service.schema.strict_json import NotJson, strict_loads

M = TypeVar("M", bound=BaseModel)


def _invalid(position: int, reason: str) -> RequestValidationError:
    error = {"type": "json_invalid", "loc": ("body", position), "msg": "JSON decode error", "input": {}}
    return RequestValidationError([{**error, "ctx": {"error": reason}}])


def parse_json(raw: bytes) -> Any:
    """A JSON body as Python values, by the stdlib parser (as FastAPI), refusing what JSON cannot carry back; every
    failure a `RequestValidationError` of type `json_invalid` (400 malformed JSON) or `missing` (empty body)."""
    if not raw.strip():
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    try:
        # the stdlib parser, as FastAPI (refusing NaN, Infinity, 1e400): big integers reach the model's own 422
        return strict_loads(raw)
    except UnicodeDecodeError as exc:
        raise _invalid(exc.start, "the body is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise _invalid(exc.pos, exc.msg) from None
    except NotJson as exc:
        raise _invalid(0, str(exc)) from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise _invalid(0, f"a number the service cannot read ({str(exc).split(':')[0]})") from None
    except RecursionError:
        raise _invalid(0, "nested too deeply") from None


def _decode(raw: bytes, model: type[M]) -> M:
    data = parse_json(raw)
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
