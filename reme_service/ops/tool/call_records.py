"""Checking the tool-call records a client sends to `add_tool_call_result`, one by one.

A record is accepted when it is a valid `ToolCallResult` with a non-blank `tool_name` (at most
`MAX_TOOL_NAME_CHARS` characters, surrounding spaces trimmed), a non-blank `output` and a non-negative
`time_cost`. `input` may be empty (tools without arguments exist); `null` counts as no arguments. An `output`
sent as a JSON object or array is kept as its JSON text. Each rejected record is reported with its position
and every reason, so a client can fix it; the accepted ones go on.

Accepted records get ReMe's derived fields: `call_hash` (MD5 of `input|output`, kept when the client sent
one) and, when `token_cost` is negative (unknown), the estimate `(len(str(input)) + len(str(output))) // 4`.
Fields the service owns are reset: `is_summarized` is false, and `score`, `summary` and `evaluation` are
filled by the judge.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from reme_service.errors import describe_validation_errors
from reme_service.schema.memory import ToolCallResult

MAX_TOOL_NAME_CHARS = 256


@dataclass(frozen=True)
class RejectedCall:
    index: int
    tool_name: str
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "tool_name": self.tool_name, "reasons": list(self.reasons)}

    def describe(self) -> str:
        who = f"#{self.index}" + (f" ({self.tool_name})" if self.tool_name else "")
        return f"{who}: {'; '.join(self.reasons)}"


def _normalised(raw: dict[str, Any]) -> dict[str, Any]:
    data = dict(raw)
    if data.get("input") is None:
        data["input"] = ""
    if isinstance(data.get("output"), dict | list):
        data["output"] = json.dumps(data["output"], ensure_ascii=False)
    return data


def _field_problem(raw: dict[str, Any], field: str) -> str:
    """Why a required text field is unusable, when it is missing or blank (other wrong types: pydantic says)."""
    value = raw.get(field)
    if value is None:
        return f"{field} is missing"
    if isinstance(value, str) and not value.strip():
        return f"{field} is empty"
    return ""


def check_call(raw: Any, index: int) -> ToolCallResult | RejectedCall:
    """One record: the accepted `ToolCallResult` (derived fields filled) or every reason it was rejected."""
    if not isinstance(raw, dict):
        return RejectedCall(index, "", (f"a tool call record must be a JSON object, not {type(raw).__name__}",))
    name_value = raw.get("tool_name")
    name = name_value.strip() if isinstance(name_value, str) else ""
    problems = {field: _field_problem(raw, field) for field in ("tool_name", "output")}
    reasons = [problem for problem in problems.values() if problem]
    if len(name) > MAX_TOOL_NAME_CHARS:
        reasons.append(f"tool_name is longer than {MAX_TOOL_NAME_CHARS} characters")
    call: ToolCallResult | None = None
    try:
        call = ToolCallResult.model_validate(_normalised(raw))
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            field = str(error["loc"][0]) if error.get("loc") else ""
            if not problems.get(field):
                reasons.append(describe_validation_errors([error], no_loc="record"))
    if call is not None and call.time_cost < 0:
        reasons.append("time_cost is negative")
    if reasons or call is None:
        return RejectedCall(index, name, tuple(reasons))
    call.tool_name = name
    call.is_summarized = False
    if not call.call_hash:
        call.call_hash = call.compute_hash()
    if call.token_cost < 0:
        call.token_cost = (len(str(call.input)) + len(str(call.output))) // 4
    return call


def check_calls(raws: list[Any]) -> tuple[list[ToolCallResult], list[RejectedCall]]:
    """Accepted records (in request order) and rejected ones."""
    accepted: list[ToolCallResult] = []
    rejected: list[RejectedCall] = []
    for index, raw in enumerate(raws):
        result = check_call(raw, index)
        if isinstance(result, RejectedCall):
            rejected.append(result)
        else:
            accepted.append(result)
    return accepted, rejected
