"""GetReflectionSubjectOp: decide whether a reflection is due and which new insight subjects to open.

Due when at least `reflect_obs_cnt_threshold` unreflected observations exist; otherwise nothing happens and
the answer says so (`metadata.reflection.due` false). Subjects are short noun phrases naming an attribute of
the user ("work", "food preferences", "children"), at most `reflect_num_questions` new ones, none repeating an
existing insight's subject. LLM reply contract: lines `Subject: <phrase>` (`Subject: None` for none); a reply
with no such line is re-asked, then fails the request (502). Without an LLM, subjects are the content words
that recur in the most observations. Output keys `REFLECTION_DUE`, `NEW_SUBJECTS`.
"""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.personal import fields, keys
from reme_service.ops.personal.line_format import parse_subjects
from reme_service.ops.personal.memories import language, user_name
from reme_service.ops.personal.op import PersonalOp
from reme_service.ops.personal.rules import dedup_key, token_overlap, tokens
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.memory import PersonalMemory
from reme_service.schema.messages import Message, Role


class GetReflectionSubjectParams(OpParams):
    reflect_obs_cnt_threshold: int = 10
    reflect_num_questions: int = 3
    llm: str = "default"


def recurring_subjects(observations: list[PersonalMemory], existing: list[str], limit: int) -> list[str]:
    """Content words found in at least two observations, not covered by `existing`: the most widespread first,
    then the longest, then the first seen. A word found in exactly the same observations as a word already chosen
    adds nothing and is skipped."""
    where: dict[str, frozenset[int]] = {}
    for i, memory in enumerate(observations):
        for token in dict.fromkeys(tokens(memory.content)):
            where[token] = where.get(token, frozenset()) | {i}
    order = {token: i for i, token in enumerate(where)}
    ranked = sorted(where, key=lambda t: (-len(where[t]), -len(t), order[t]))
    out: list[str] = []
    for token in ranked:
        if len(where[token]) < 2 or len(out) >= limit:
            break
        covered = any(token_overlap(token, subject) >= 1.0 for subject in existing + out)
        if not covered and all(where[token] != where.get(chosen) for chosen in out):
            out.append(token)
    return out


class GetReflectionSubjectOp(PersonalOp[GetReflectionSubjectParams]):
    prompts = {"get_reflection_subject": {"user_name", "observations", "subjects", "count"}}
    inputs = (*PersonalOp.inputs, fields.USER_NAME)
    may_read = (keys.UNREFLECTED, keys.INSIGHTS)
    writes = (keys.REFLECTION_DUE, keys.NEW_SUBJECTS)

    async def run(self, ctx: ServiceContext) -> None:
        observations = ctx.get(keys.UNREFLECTED, [])
        threshold = self.params.reflect_obs_cnt_threshold
        due = len(observations) >= threshold
        ctx[keys.REFLECTION_DUE] = due
        ctx.response.metadata.setdefault("reflection", {})["due"] = due
        if not due:
            ctx.response.answer = f"not enough new observations to reflect on ({len(observations)} < {threshold})"
            ctx[keys.NEW_SUBJECTS] = []
            return
        existing = [m.reflection_subject for m in ctx.get(keys.INSIGHTS, []) if m.reflection_subject]
        llm = ctx.services.llm(self.params.llm)
        if llm.available:
            proposed = await self._ask(ctx, observations, existing)
        else:
            ctx.without_llm(self.name)
            proposed = recurring_subjects(observations, existing, self.params.reflect_num_questions)
        taken = {dedup_key(s) for s in existing}
        subjects: list[str] = []
        for subject in proposed:
            if dedup_key(subject) and dedup_key(subject) not in taken:
                taken.add(dedup_key(subject))
                subjects.append(subject)
        ctx[keys.NEW_SUBJECTS] = subjects[: self.params.reflect_num_questions]

    async def _ask(self, ctx: ServiceContext, observations: list[PersonalMemory], existing: list[str]) -> list[str]:
        lang = language(ctx)
        prompt = self.render(
            ctx,
            "get_reflection_subject",
            user_name=user_name(ctx),
            observations="\n".join(f"- {m.content}" for m in observations),
            subjects=", ".join(existing) or ("无" if lang == "zh" else "none"),
            count=self.params.reflect_num_questions,
        )
        return await chat_parsed(
            ctx.services.llm(self.params.llm),
            [Message(role=Role.USER, content=prompt)],
            parse_subjects,
            what="reflection subjects",
        )
