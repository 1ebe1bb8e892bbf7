"""UpdateInsightOp: merge the new observations into the insights (one per subject) they are relevant to.

Relevance of an observation to an insight: the share of the subject's words found in the observation's text and
keywords (0.9 when the observation carries the same `reflection_subject`). Insights — existing ones and one per
new subject — with at least one observation at `update_insight_threshold` or above are ranked by their best
relevance, and the first `update_insight_max_count` are rewritten from their current value and those
observations, newer information winning on conflict. LLM reply contract: one line `Value: <the attribute's
value>` (`Value: None` when the observations say nothing about the subject); a reply without it is re-asked,
then fails the request (502). Without an LLM, the value is the three newest relevant observations followed by
the old value, cut to `max_value_chars`. Output key `UPDATED_INSIGHTS`.
"""

from __future__ import annotations

from typing import Any

from reme_service.concurrency import run_all
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.personal import fields, keys
from reme_service.ops.personal.line_format import parse_value
from reme_service.ops.personal.memories import (
    INSIGHT,
    RULES_AUTHOR,
    language,
    stable_id,
    user_name,
)
from reme_service.ops.personal.op import PersonalOp
from reme_service.ops.personal.rules import keywords, token_overlap
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.memory import PersonalMemory, now_str
from reme_service.schema.messages import Message, Role

MAX_SOURCE_IDS = 20


class UpdateInsightParams(OpParams):
    update_insight_threshold: float = 0.3
    update_insight_max_count: int = 5
    max_value_chars: int = 400
    concurrency: int = 4
    llm: str = "default"


def relevance(insight: PersonalMemory, observation: PersonalMemory) -> float:
    subject = insight.reflection_subject
    if observation.reflection_subject and observation.reflection_subject == subject:
        return 0.9
    words = observation.metadata.get("keywords") or []
    text = observation.content + " " + " ".join(str(w) for w in words if isinstance(w, str))
    return token_overlap(subject, text)


def new_insight(target: str, subject: str) -> PersonalMemory:
    return PersonalMemory(
        memory_id=stable_id(target, INSIGHT, subject.strip().lower()),
        target=target,
        reflection_subject=subject,
        time_created="",
        metadata={"memory_type": INSIGHT, "insight_type": INSIGHT},
    )


class UpdateInsightOp(PersonalOp[UpdateInsightParams]):
    prompts = {"update_insight": {"user_name", "subject", "value", "observations"}}
    inputs = (*PersonalOp.inputs, fields.USER_NAME)
    may_read = (keys.REFLECTION_DUE, keys.UNREFLECTED, keys.INSIGHTS, keys.NEW_SUBJECTS)
    writes = (keys.UPDATED_INSIGHTS,)

    async def run(self, ctx: ServiceContext) -> None:
        ctx[keys.UPDATED_INSIGHTS] = []
        if not ctx.get(keys.REFLECTION_DUE, False):
            return
        target = user_name(ctx)
        observations = ctx.get(keys.UNREFLECTED, [])
        insights = ctx.get(keys.INSIGHTS, []) + [new_insight(target, s) for s in ctx.get(keys.NEW_SUBJECTS, [])]
        ranked: list[tuple[float, PersonalMemory, list[PersonalMemory]]] = []
        for insight in insights:
            scored = [(relevance(insight, o), o) for o in observations]
            relevant = [o for r, o in scored if r >= self.params.update_insight_threshold]
            if relevant:
                ranked.append((max(r for r, _ in scored), insight, relevant))
        ranked.sort(key=lambda item: item[0], reverse=True)
        chosen = ranked[: self.params.update_insight_max_count]
        llm = ctx.services.llm(self.params.llm)
        if chosen and not llm.available:
            ctx.without_llm(self.name)
        results = await run_all(
            (self._update(ctx, insight, relevant, target) for _, insight, relevant in chosen),
            limit=self.params.concurrency,
        )
        ctx[keys.UPDATED_INSIGHTS] = [insight for insight in results if insight is not None]

    async def _update(
        self, ctx: ServiceContext, insight: PersonalMemory, relevant: list[PersonalMemory], target: str
    ) -> PersonalMemory | None:
        relevant = sorted(relevant, key=lambda m: m.time_created)
        llm = ctx.services.llm(self.params.llm)
        if llm.available:
            value = await self._ask(ctx, insight, relevant, target)
            author = llm.model_name
        else:
            newest = [m.content for m in reversed(relevant[-3:])]
            value = " / ".join([*newest, insight.content] if insight.content else newest)[: self.params.max_value_chars]
            author = RULES_AUTHOR
        if not value:
            return None
        sources = [*insight.metadata.get("source_observation_ids", []), *(m.memory_id for m in relevant)]
        meta: dict[str, Any] = {
            **insight.metadata,
            "memory_type": INSIGHT,
            "insight_type": INSIGHT,
            "keywords": keywords(value),
            "source_observation_ids": sources[-MAX_SOURCE_IDS:],
            "observation_count": int(insight.metadata.get("observation_count", 0)) + len(relevant),
        }
        return insight.model_copy(
            update={
                "content": value,
                "when_to_use": f"{insight.reflection_subject}: {value}",
                "author": author,
                "time_created": max([insight.time_created, *(m.time_created for m in relevant)]),
                "time_modified": now_str(),
                "metadata": meta,
            }
        )

    async def _ask(
        self, ctx: ServiceContext, insight: PersonalMemory, relevant: list[PersonalMemory], target: str
    ) -> str:
        lang = language(ctx)
        none = "无" if lang == "zh" else "none yet"
        prompt = self.render(
            ctx,
            "update_insight",
            user_name=target,
            subject=insight.reflection_subject,
            value=insight.content or none,
            observations="\n".join(f"- [{m.time_created}] {m.content}" for m in relevant),
        )
        return await chat_parsed(
            ctx.services.llm(self.params.llm),
            [Message(role=Role.USER, content=prompt)],
            parse_value,
            what="insight value",
        )
