"""Limits on request values that every JSON consumer downstream can handle: checked at the edge, before any op runs.

Python's `json` accepts what later steps cannot serialise: integers of any size, nesting as deep as the recursion
limit, and lone UTF-16 surrogates (`"\\ud800"`). The service answers with orjson (64-bit integers, at most 254
levels of nesting, valid UTF-8 only) and stores or echoes client values, so such a value used to fail *after* the
work was done (files written, then a 500). `check_json_values` refuses them up front:

* integers outside the signed 64-bit range `-2**63 .. 2**63-1` (what JSON stores and readers commonly hold);
* nesting deeper than `MAX_JSON_DEPTH` (64) levels, counted from the request body (the body object is level 1),
  which leaves room for the envelope around echoed values within orjson's limit;
* strings or object keys holding a lone surrogate (not valid Unicode, so not encodable as UTF-8).

The common case costs one `orjson.dumps` (C speed) of the checked values; only when that refuses them does a
Python walk find the first offending value and its location, reported as a pydantic error at that location
(HTTP 422 naming the field, e.g. `["body", "messages", 0, "content", 0, "n"]`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_JSON_DEPTH = 64
# orjson refuses to serialise more than this many nested containers (measured: 254 pass, 255 fail).
_ORJSON_MAX_DEPTH = 254
_EXCERPT_CHARS = 40

Loc = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class JsonProblem:
    """The first value that breaks a limit: where it is, the error type, a message, and a printable excerpt."""

    loc: Loc
    type: str
    message: str
    excerpt: str


def _excerpt(value: Any) -> str:
    """`value` as at most 40 printable characters of valid UTF-8 (a lone surrogate becomes `\\udXXX`)."""
    text = value if isinstance(value, str) else repr(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS] + "..."


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _surrogate(loc: Loc, text: str, what: str) -> JsonProblem:
    return JsonProblem(
        loc,
        "json_invalid_unicode",
        f"{what} holds a lone UTF-16 surrogate, which is not valid Unicode",
        _excerpt(text),
    )


def find_problem(value: Any, loc: Loc = (), depth: int = 1) -> JsonProblem | None:
    """The first value inside `value` that breaks a limit (`value` itself sits at nesting level `depth`).

    Walks dicts, lists, tuples and pydantic models (Python API callers may pass models); other values are leaves.
    The walk stops one level past `MAX_JSON_DEPTH`, so its own recursion is bounded.
    """
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return None
    if isinstance(value, int):
        if INT64_MIN <= value <= INT64_MAX:
            return None
        return JsonProblem(
            loc, "json_integer_range", "integer outside the 64-bit range (-2**63 to 2**63-1)", _excerpt(value)
        )
    if isinstance(value, str):
        return _surrogate(loc, value, "string") if _has_surrogate(value) else None
    items: Any
    if isinstance(value, BaseModel):
        items = dict(value).items()
    elif isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    if depth > MAX_JSON_DEPTH:
        return JsonProblem(
            loc, "json_too_deep", f"nested deeper than {MAX_JSON_DEPTH} levels of objects and arrays", "..."
        )
    for key, item in items:
        if isinstance(key, str) and _has_surrogate(key):
            # The location names the key with the surrogate escaped, so that the error itself stays valid UTF-8.
            return _surrogate((*loc, _excerpt(key)), key, "object key")
        problem = find_problem(item, (*loc, key), depth + 1)
        if problem is not None:
            return problem
    return None


class _Nest(threading.local):
    """`_ORJSON_MAX_DEPTH - MAX_JSON_DEPTH` nested lists, made once per thread (`hole` the innermost): a value put
    in `hole` sits as deep as that many wraps of it would, without building them on every request."""

    def __init__(self) -> None:
        self.hole: list[Any] = []
        outer: list[Any] = self.hole
        for _ in range(_ORJSON_MAX_DEPTH - MAX_JSON_DEPTH - 1):
            outer = [outer]
        self.outer = outer


_NEST = _Nest()


def _fast_ok(values: Mapping[str, Any]) -> bool:
    """True when orjson serialises `values` nested inside enough extra lists that only depth ≤ MAX_JSON_DEPTH fits.

    `OPT_STRICT_INTEGER` makes any integer beyond 53 bits fail too; the slow walk then applies the 64-bit rule.
    A failure here is only a hint: the caller walks the values to decide.
    """
    nest = _NEST  # this thread's own lists (a large body is decoded in a worker thread)
    nest.hole.append(values)
    try:
        orjson.dumps(nest.outer, option=orjson.OPT_STRICT_INTEGER)
    except (TypeError, ValueError):
        return False
    finally:
        nest.hole.clear()
    return True


def check_json_values(values: Mapping[str, Any], title: str) -> None:
    """Raise a pydantic `ValidationError` (one error, at the offending location) when a value breaks a limit.

    `values` is a request body (a mapping at nesting level 1); `title` names the model in the error.
    """
    if _fast_ok(values):
        return
    problem = find_problem(values)
    if problem is None:
        return
    error = PydanticCustomError(problem.type, problem.message)
    raise ValidationError.from_exception_data(
        title, [InitErrorDetails(type=error, loc=problem.loc, input=problem.excerpt)]
    )
