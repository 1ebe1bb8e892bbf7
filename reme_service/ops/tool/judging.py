"""Judging tool calls: an LLM as judge, or a documented heuristic when no LLM is configured.

Every judged call gets a `Verdict`: a score of 0.0 or 1.0 (or `None`, unknown), a one-line summary and a
short evaluation, and `metadata.evaluated_by` on the call says which judge ran (`llm`, `heuristic`, `none`).

**LLM judge.** One chat per call, at most `max_concurrent` at a time. The reply must hold a JSON object
`{"summary": str, "evaluation": str, "score": number}` with a score in [0, 1], binarised (below 0.5 → 0.0,
else 1.0); a reply without one is asked again (`attempts` in all). A call is never dropped:

* replies that never parse → score unknown, reason `unparseable_judgement`;
* the LLM itself failing (after the client's retries) → score unknown, reason `llm_unavailable`; the other
  calls of the request are then not sent to it at all (they get the same reason).

**Heuristic judge (no LLM).** Score 0.0 when the client reported `success: false`, when the output is a JSON
object whose `success` is false or whose `error` is set, or when the output contains an error marker
(`ERROR_MARKERS`: "error:", "exception", "traceback", "timed out", "not found", "no results", "rate limit",
"unavailable", "busy", "denied", "unauthorized", "forbidden", "invalid …", an HTTP 4xx/5xx status, or an
output starting with "error"/"failed"); otherwise 1.0. The summary is built from the tool name, input and
output; the evaluation names the rule that decided.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from reme_service.concurrency import run_all
from reme_service.errors import LLMError, LLMReplyError
from reme_service.providers.llm.base import LLMClient
from reme_service.providers.llm.json_extract import extract_json_object
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.memory import ToolCallResult
from reme_service.schema.messages import Message, Role

UNPARSEABLE = "unparseable_judgement"
LLM_UNAVAILABLE = "llm_unavailable"

ERROR_MARKERS = re.compile(
    r"^\s*(?:error|failed|failure)\b"
    r"|\b(?:error|exception)\s*:"
    r"|\btraceback\b|\bexception\b|\btimed?\s?out\b|\btimeout\b|\bnot found\b|\bno results?\b|\brate limit"
    r"|\btoo many requests\b|\b(?:service )?unavailable\b|\bcurrently busy\b|\bpermission denied\b"
    r"|\baccess denied\b|\bunauthori[sz]ed\b|\bforbidden\b|\binvalid (?:argument|parameter|input|request)"
    r"|\b(?:4\d\d|5\d\d) (?:error|bad request|not found|internal server error|service unavailable)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Verdict:
    score: float | None
    summary: str
    evaluation: str
    judge: Literal["llm", "heuristic", "none"]
    #: why the score is unknown (`UNPARSEABLE`, `LLM_UNAVAILABLE`), empty when it is known
    reason: str = ""

    def apply(self, call: ToolCallResult) -> None:
        call.score = self.score
        call.summary = self.summary
        call.evaluation = self.evaluation
        call.metadata = {**call.metadata, "evaluated_by": self.judge}


def _preview(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_failure(output: str) -> str:
    try:
        data = json.loads(output)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    if data.get("success") is False:
        return "the output reports success: false"
    if data.get("error"):
        return "the output has an 'error' field"
    return ""


def heuristic_verdict(call: ToolCallResult) -> Verdict:
    """The no-LLM judgement (rules in the module docstring)."""
    summary = f"{call.tool_name}({_preview(call.input, 60)}) -> {_preview(call.output, 80)}"
    if not call.success:
        reason = "the tool reported a failure (success: false)"
    else:
        reason = _json_failure(call.output)
        if not reason and (match := ERROR_MARKERS.search(call.output)):
            reason = f"the output looks like an error ({match.group(0).strip()!r})"
    if reason:
        return Verdict(0.0, summary, f"Heuristic judgement (no LLM): {reason}.", "heuristic")
    evaluation = "Heuristic judgement (no LLM): the tool reported success and the output shows no error marker."
    return Verdict(1.0, summary, evaluation, "heuristic")


def binary_score(value: Any) -> float | None:
    """0.0 or 1.0 from a number (or numeric string) in [0, 1]; None for anything else."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        return None
    return 0.0 if value < 0.5 else 1.0


def parse_verdict(reply: str) -> Verdict | None:
    """The LLM's judgement, or None when the reply does not follow the contract."""
    data = extract_json_object(reply)
    if data is None:
        return None
    score = binary_score(data.get("score"))
    if score is None:
        return None
    summary, evaluation = data.get("summary", ""), data.get("evaluation", "")
    if not isinstance(summary, str) or not isinstance(evaluation, str):
        return None
    return Verdict(score, " ".join(summary.split()), evaluation.strip(), "llm")


def unknown_verdict(reason: str, detail: str) -> Verdict:
    what = "its judgement could not be parsed" if reason == UNPARSEABLE else "the LLM was unavailable"
    return Verdict(None, "", f"Not evaluated: {what} ({detail}).", "none", reason)


async def judge_with_llm(
    llm: LLMClient,
    calls: Sequence[ToolCallResult],
    prompt_for: Callable[[ToolCallResult], str],
    *,
    max_concurrent: int,
    attempts: int,
) -> list[Verdict]:
    """One verdict per call, in order (rules in the module docstring)."""
    outage: list[str] = []

    async def judge(call: ToolCallResult) -> Verdict:
        if outage:  # a judgement that waited for its turn after the provider failed is not attempted
            return unknown_verdict(LLM_UNAVAILABLE, outage[0])
        messages = [Message(role=Role.USER, content=prompt_for(call))]
        try:
            return await chat_parsed(llm, messages, parse_verdict, attempts=attempts, what="tool-call judgement")
        except LLMReplyError:  # replies arrived, none usable
            return unknown_verdict(UNPARSEABLE, f"{attempts} replies without a valid score")
        except LLMError as exc:  # the provider is down
            outage.append(exc.message)
            return unknown_verdict(LLM_UNAVAILABLE, exc.message)

    return await run_all((judge(call) for call in calls), limit=max_concurrent)
