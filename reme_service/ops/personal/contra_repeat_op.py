"""ContraRepeatOp: drop observations that an equal-or-newer one contradicts or already contains.

The new observations and the reloaded ones (`TODAY_MEMORIES`) are ordered newest first (by the time they were
said; a new observation before a stored one of the same time; a later message before an earlier one). With an
LLM they are judged in batches of `contra_repeat_max_count` — every item is judged or kept, none is dropped for
lack of room — against the items before them in the batch. Reply contract: `Judgment: <n> | <Contradiction |
Contained | None>`; a reply with no such line is re-asked, then fails the request (502). Items without a line
are kept. Without an LLM only repetitions are found: an item whose text equals, or is contained in, a newer
item's text (after lower-casing and removing punctuation); contradictions need the LLM.

A stored observation that a newer one contradicts is not deleted: it is marked invalid (`valid_to` = the time of
the newest new observation; see `lifecycle.py`) and written back, so its history and the `INVALIDATE` event say
so and `as_of` retrieval still finds it for the time it held. A repeated (contained) one is deleted.

Output: `MEMORY_LIST` = the new observations that survive, plus the invalidated stored ones;
`DELETED_MEMORY_IDS` = the stored repetitions. `metadata.memory_list` lists the new memories written,
`metadata.invalidated_memory_ids` the stored ones marked invalid; the answer is the new contents, one per line.
"""

from __future__ import annotations

from reme_service.concurrency import run_all
from reme_service.flow.op import OpParams
from reme_service.ops.common import keys as common_keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.personal import keys
from reme_service.ops.personal.lifecycle import invalidated
from reme_service.ops.personal.line_format import Judgment, parse_judgments
from reme_service.ops.personal.memories import batches
from reme_service.ops.personal.op import PersonalOp
from reme_service.ops.personal.rules import dedup_key
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.memory import BaseMemory, PersonalMemory
from reme_service.schema.messages import Message, Role


class ContraRepeatParams(OpParams):
    contra_repeat_max_count: int = 50
    enable_contra_repeat: bool = True
    concurrency: int = 4
    llm: str = "default"


def order_newest_first(new: list[PersonalMemory], stored: list[PersonalMemory]) -> list[PersonalMemory]:
    """Newest first; at equal times new before stored, and a later message before an earlier one."""
    ranked = [((m.time_created, 1, i), m) for i, m in enumerate(new)]
    ranked += [((m.time_created, 0, i), m) for i, m in enumerate(stored)]
    ranked.sort(key=lambda r: r[0], reverse=True)
    return [m for _, m in ranked]


def repeated(items: list[PersonalMemory]) -> set[str]:
    """Ids of items (newest first) whose text equals or is contained in an earlier item's text."""
    kept: list[str] = []
    losers: set[str] = set()
    for item in items:
        key = dedup_key(item.content)
        if key and any(key == other or key in other for other in kept):
            losers.add(item.memory_id)
        else:
            kept.append(key)
    return losers


class ContraRepeatOp(PersonalOp[ContraRepeatParams]):
    prompts = {"contra_repeat": {"count", "statements"}}
    may_read = (keys.OBSERVATIONS, keys.OBSERVATIONS_WITH_TIME, keys.TODAY_MEMORIES)
    writes = (common_keys.MEMORY_LIST, common_keys.DELETED_MEMORY_IDS)

    async def run(self, ctx: ServiceContext) -> None:
        new = ctx.get(keys.OBSERVATIONS, []) + ctx.get(keys.OBSERVATIONS_WITH_TIME, [])
        new_ids = {m.memory_id for m in new}
        stored = [m for m in ctx.get(keys.TODAY_MEMORIES, []) if m.memory_id not in new_ids]
        items = order_newest_first(new, stored)
        verdicts: dict[str, str] = {}  # loser id -> contradiction | contained
        if self.params.enable_contra_repeat and len(items) > 1:
            llm = ctx.services.llm(self.params.llm)
            if llm.available:
                groups = batches(items, self.params.contra_repeat_max_count)
                for result in await run_all((self._judge(ctx, g) for g in groups), limit=self.params.concurrency):
                    verdicts.update(result)
            else:
                ctx.without_llm(self.name)
                verdicts = dict.fromkeys(repeated(items), "contained")
        kept = [m for m in new if m.memory_id not in verdicts]
        newest = max((m.time_created for m in new), default="")
        contradicted = [invalidated(m, newest) for m in stored if verdicts.get(m.memory_id) == "contradiction"]
        survivors: list[BaseMemory] = [*kept, *contradicted]
        for memory in survivors:
            memory.workspace_id = ctx.workspace_id
        deleted = [m.memory_id for m in stored if verdicts.get(m.memory_id) == "contained"]
        ctx[common_keys.MEMORY_LIST] = survivors
        ctx[common_keys.DELETED_MEMORY_IDS] = deleted
        ctx.response.answer = "\n".join(m.content for m in kept)
        ctx.response.metadata["memory_list"] = [m.model_dump(mode="json") for m in kept]
        ctx.response.metadata["deleted_memory_ids"] = deleted
        ctx.response.metadata["invalidated_memory_ids"] = [m.memory_id for m in contradicted]
        ctx.response.metadata["contra_repeat"] = {
            "checked": len(items),
            "new_dropped": len(new) - len(kept),
            "stored_deleted": len(deleted),
            "stored_invalidated": len(contradicted),
        }

    async def _judge(self, ctx: ServiceContext, group: list[PersonalMemory]) -> dict[str, str]:
        """Loser id -> its verdict (`contradiction` or `contained`)."""
        if len(group) < 2:
            return {}
        lines = "\n".join(f"{i}. [{m.time_created}] {m.content}" for i, m in enumerate(group, 1))
        prompt = self.render(ctx, "contra_repeat", count=len(group), statements=lines)
        judged: dict[int, Judgment] = await chat_parsed(
            ctx.services.llm(self.params.llm),
            [Message(role=Role.USER, content=prompt)],
            lambda reply: parse_judgments(reply, len(group)),
            what="contradiction judgments",
        )
        return {group[j.index - 1].memory_id: j.verdict for j in judged.values() if j.index > 1 and j.verdict != "none"}
