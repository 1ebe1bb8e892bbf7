"""LongContraRepeatOp: resolve contradictions and repetitions among the user's insights; finish the reflection.

The insights this reflection updated come first (newest first), then the user's other insights. With an LLM they
are judged in batches of `long_contra_repeat_max_count` against the items before them. Reply contract:
`Judgment: <n> | <Contradiction | Contained | None> [| <corrected text>]`; a reply with no such line is re-asked,
then fails the request (502). A contradicted insight with a corrected text is rewritten to it; a stored one without
is marked invalid (`valid_to` = now, kept; `lifecycle.py`); a contained one is removed. Without an LLM only
repeated texts are removed.

Output: `MEMORY_LIST` = the insights to write (updated or corrected) plus the observations this reflection
consumed, marked `reflected`; `DELETED_MEMORY_IDS` = stored insights removed. Nothing is written before the
following UpdateVectorStoreOp, so a failure anywhere leaves the store as it was.
"""

from __future__ import annotations

from reme_service.concurrency import run_all
from reme_service.flow.op import OpParams
from reme_service.ops.common import keys as common_keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.personal import keys
from reme_service.ops.personal.contra_repeat_op import repeated
from reme_service.ops.personal.lifecycle import invalidated
from reme_service.ops.personal.line_format import Judgment, parse_judgments
from reme_service.ops.personal.memories import batches, newest_first
from reme_service.ops.personal.op import PersonalOp
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.memory import BaseMemory, PersonalMemory, now_str
from reme_service.schema.messages import Message, Role


class LongContraRepeatParams(OpParams):
    long_contra_repeat_max_count: int = 50
    enable_long_contra_repeat: bool = True
    concurrency: int = 4
    llm: str = "default"


class LongContraRepeatOp(PersonalOp[LongContraRepeatParams]):
    prompts = {"long_contra_repeat": {"count", "statements"}}
    may_read = (keys.REFLECTION_DUE, keys.UPDATED_INSIGHTS, keys.INSIGHTS, keys.UNREFLECTED)
    writes = (common_keys.MEMORY_LIST, common_keys.DELETED_MEMORY_IDS)

    async def run(self, ctx: ServiceContext) -> None:
        ctx[common_keys.MEMORY_LIST] = []
        ctx[common_keys.DELETED_MEMORY_IDS] = []
        if not ctx.get(keys.REFLECTION_DUE, False):
            return
        stored, rewritten = ctx.get(keys.INSIGHTS, []), ctx.get(keys.UPDATED_INSIGHTS, [])
        updated = newest_first(rewritten)
        stored_ids = {m.memory_id for m in stored}
        updated_ids = {m.memory_id for m in updated}
        others = newest_first(m for m in stored if m.memory_id not in updated_ids)
        items = updated + others
        verdicts: dict[str, Judgment] = {}
        if self.params.enable_long_contra_repeat and len(items) > 1:
            if ctx.services.llm(self.params.llm).available:
                groups = batches(items, self.params.long_contra_repeat_max_count)
                for result in await run_all((self._judge(ctx, g) for g in groups), limit=self.params.concurrency):
                    verdicts.update(result)
            else:
                ctx.without_llm(self.name)
                verdicts = {i: Judgment(0, "contained") for i in repeated(items)}
        written: list[PersonalMemory] = []
        retired: list[PersonalMemory] = []  # contradicted, no correction: kept, marked invalid
        deleted: list[str] = []
        for item in items:
            verdict = verdicts.get(item.memory_id)
            if verdict is None or verdict.verdict == "none":
                if item.memory_id in updated_ids:
                    written.append(item)
            elif verdict.verdict == "contradiction" and verdict.corrected:
                written.append(self._corrected(item, verdict.corrected))
            elif verdict.verdict == "contradiction" and item.memory_id in stored_ids:
                retired.append(invalidated(item, now_str()))
            elif item.memory_id in stored_ids:
                deleted.append(item.memory_id)
        consumed = [self._reflected(m) for m in ctx.get(keys.UNREFLECTED, [])]
        memories: list[BaseMemory] = [*written, *retired, *consumed]
        for memory in memories:
            memory.workspace_id = ctx.workspace_id
        ctx[common_keys.MEMORY_LIST] = memories
        ctx[common_keys.DELETED_MEMORY_IDS] = deleted
        ctx.response.answer = "\n".join(f"{m.reflection_subject}: {m.content}" for m in written)
        ctx.response.metadata["memory_list"] = [m.model_dump(mode="json") for m in written]
        ctx.response.metadata["deleted_memory_ids"] = deleted
        ctx.response.metadata["invalidated_memory_ids"] = [m.memory_id for m in retired]
        ctx.response.metadata.setdefault("reflection", {})["reflected_observations"] = len(consumed)

    @staticmethod
    def _corrected(item: PersonalMemory, text: str) -> PersonalMemory:
        return item.model_copy(
            update={"content": text, "when_to_use": f"{item.reflection_subject}: {text}", "time_modified": now_str()}
        )

    @staticmethod
    def _reflected(observation: PersonalMemory) -> PersonalMemory:
        return observation.model_copy(update={"metadata": {**observation.metadata, "reflected": True}})

    async def _judge(self, ctx: ServiceContext, group: list[PersonalMemory]) -> dict[str, Judgment]:
        if len(group) < 2:
            return {}
        lines = "\n".join(f"{i}. {m.reflection_subject}: {m.content}" for i, m in enumerate(group, 1))
        prompt = self.render(ctx, "long_contra_repeat", count=len(group), statements=lines)
        judged: dict[int, Judgment] = await chat_parsed(
            ctx.services.llm(self.params.llm),
            [Message(role=Role.USER, content=prompt)],
            lambda reply: parse_judgments(reply, len(group), with_correction=True),
            what="insight judgments",
        )
        return {group[j.index - 1].memory_id: j for j in judged.values() if j.index > 1}
