"""MemoryValidationOp: let the LLM judge each extracted memory; keep those that pass.

Collects `success_task_memories`, `failure_task_memories` and `comparative_task_memories` (in that order) and
asks, one call per memory (concurrently, at most `max_concurrency`), for the JSON object
`{"is_valid": bool, "score": 0..1, "feedback": "...", "recommendations": "..."}`. A memory is kept when
`is_valid` is true and `score >= validation_threshold`; its `score` becomes the validation score.

Unlike ReMe, a reply that is empty or does not follow the contract is never read as "valid, 0.5". An empty
reply (still empty after the provider's own retries) rejects the memory; a reply off the contract is re-asked
(`attempts` calls in all) and, if no usable reply comes, the memory is **rejected** with that reason. Every
rejection is listed in `metadata.rejected_memories`. A provider failure (after the client's retries) fails the
request with a 502 before anything is stored.

Writes `memory_list` (context and response) and `answer` = the JSON list of kept memories. Without an LLM
every memory is kept unjudged and the op is listed in `metadata.no_llm_ops`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from reme_service.concurrency import run_all
from reme_service.errors import LLMReplyError
from reme_service.flow.op import OpParams
from reme_service.ops.common import keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.task import keys as task_keys
from reme_service.providers.llm.json_extract import extract_json_object
from reme_service.schema.memory import BaseMemory, TaskMemory
from reme_service.schema.messages import Message, Role


class MemoryValidationParams(OpParams):
    validation_threshold: float = 0.5
    attempts: int = 3
    llm: str = "default"
    max_concurrency: int = 4


def parse_verdict(reply: str) -> tuple[bool, float, str] | None:
    """`(is_valid, score, feedback)` from a reply that follows the contract, else None."""
    data = extract_json_object(reply)
    if data is None:
        return None
    valid = data.get("is_valid")
    if isinstance(valid, str) and valid.strip().lower() in ("true", "false"):
        valid = valid.strip().lower() == "true"
    score = data.get("score")
    if not isinstance(valid, bool) or not isinstance(score, int | float) or isinstance(score, bool):
        return None
    if not 0.0 <= float(score) <= 1.0:
        return None
    feedback = data.get("feedback")
    return valid, float(score), feedback if isinstance(feedback, str) else ""


def memories_json(memories: Sequence[BaseMemory]) -> str:
    """The `answer` of the summary flows: the JSON list of the memories as stored."""
    return json.dumps([m.model_dump(mode="json") for m in memories], ensure_ascii=False)


def publish(ctx: ServiceContext, memories: Sequence[TaskMemory]) -> None:
    """Make `memories` the flow's result: the context list, `metadata.memory_list` and the `answer`. An op that
    calls this declares `keys.MEMORY_LIST` in `writes`."""
    stored: list[BaseMemory] = list(memories)
    ctx[keys.MEMORY_LIST] = stored
    ctx.response.metadata["memory_list"] = [m.model_dump(mode="json") for m in memories]
    ctx.response.answer = memories_json(memories)


class MemoryValidationOp(ServiceOp[MemoryValidationParams]):
    prompts = {"validate": {"when_to_use", "content"}}
    may_read = (task_keys.SUCCESS_MEMORIES, task_keys.FAILURE_MEMORIES, task_keys.COMPARATIVE_MEMORIES)
    writes = (keys.MEMORY_LIST,)

    async def run(self, ctx: ServiceContext) -> None:
        candidates = [
            *ctx.get(task_keys.SUCCESS_MEMORIES, []),
            *ctx.get(task_keys.FAILURE_MEMORIES, []),
            *ctx.get(task_keys.COMPARATIVE_MEMORIES, []),
        ]
        if not candidates:
            publish(ctx, [])
            return
        if not ctx.services.llm(self.params.llm).available:
            ctx.without_llm(self.name)
            publish(ctx, candidates)
            return
        verdicts = await run_all([self._judge(ctx, m) for m in candidates], limit=self.params.max_concurrency)
        kept: list[TaskMemory] = []
        rejected: list[dict[str, Any]] = []
        for memory, (accepted, reason) in zip(candidates, verdicts, strict=True):
            if accepted:
                kept.append(memory)
            else:
                rejected.append({"when_to_use": memory.when_to_use, "content": memory.content, "reason": reason})
        if rejected:
            ctx.response.metadata["rejected_memories"] = rejected
        publish(ctx, kept)

    async def _judge(self, ctx: ServiceContext, memory: TaskMemory) -> tuple[bool, str]:
        """Ask until a usable verdict arrives; sets the memory's score when accepted. Returns (kept, reason)."""
        llm = ctx.services.llm(self.params.llm)
        prompt = self.render(ctx, "validate", when_to_use=memory.when_to_use, content=memory.content)
        last = ""
        attempts = max(1, self.params.attempts)
        for _ in range(attempts):
            try:
                reply = await llm.chat([Message(role=Role.USER, content=prompt)])
            except LLMReplyError as exc:  # empty every time the provider was asked; a provider failure propagates
                return False, f"the validation reply was empty: {exc.message}"
            last = reply.text
            verdict = parse_verdict(last)
            if verdict is None:
                continue
            valid, score, feedback = verdict
            if valid and score >= self.params.validation_threshold:
                memory.score = score
                return True, ""
            why = "judged invalid" if not valid else f"score {score:.2f} below {self.params.validation_threshold}"
            return False, f"{why}: {feedback}" if feedback else why
        return False, f"no usable validation reply after {attempts} attempts; last reply: {last[:200]!r}"
