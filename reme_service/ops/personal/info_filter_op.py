"""InfoFilterOp: keep the user's messages that say something about the user, each with the time it was said.

Input: `trajectories` (a list of `{messages, time_created?}`) and/or `messages`. Only `user` messages whose
`metadata.memorized` is not true are considered. A message's time is its own `time_created`, else its
trajectory's, else the time of the request.

Each message gets an information score 0-3 (see `rules.py` for the scale). With an LLM, messages are scored in
batches of `batch_size`; the reply contract is one line `Result: <n> | <score>` per message, every message
scored — otherwise the LLM is asked again and, after the last attempt, the request fails (502) before anything
is stored. Without an LLM, the deterministic rules of `rules.info_score` score them. Messages whose score is one
of `preserved_scores` are kept (key `STATEMENTS`).
"""

from __future__ import annotations

from datetime import datetime

from reme_service.concurrency import run_all
from reme_service.errors import InvalidRequestError
from reme_service.flow.op import OpParams
from reme_service.ops.common import fields as common_fields
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.personal import fields, keys
from reme_service.ops.personal.line_format import parse_scores
from reme_service.ops.personal.memories import Statement, batches, user_name
from reme_service.ops.personal.op import PersonalOp
from reme_service.ops.personal.rules import info_score
from reme_service.ops.personal.timed_messages import PersonalMessage, PersonalTrajectory, personal_items
from reme_service.providers.llm.structured import chat_parsed
from reme_service.retrieval.timestamps import parse_timestamp
from reme_service.schema.messages import Message, Role


class InfoFilterParams(OpParams):
    preserved_scores: str = "2,3"
    info_filter_msg_max_size: int = 200
    batch_size: int = 20
    concurrency: int = 4
    llm: str = "default"


def _time(value: str, fallback: datetime) -> tuple[datetime, bool]:
    return (parse_timestamp(value), True) if value else (fallback, False)


def collect_messages(ctx: ServiceContext) -> list[tuple[PersonalMessage, datetime, bool]]:
    """Every message of the request with its time and whether the time came from the request. Reads
    `fields.TRAJECTORIES` and `MESSAGES`."""
    now = datetime.now().replace(microsecond=0)
    out: list[tuple[PersonalMessage, datetime, bool]] = []
    trajectories = ctx.input(fields.TRAJECTORIES)
    messages = ctx.input(common_fields.MESSAGES)
    for trajectory in personal_items(PersonalTrajectory, trajectories, "trajectories"):
        base, given = _time(trajectory.time_created, now)
        for message in trajectory.messages:
            moment, own = _time(message.time_created, base)
            out.append((message, moment, own or given))
    for message in personal_items(PersonalMessage, messages, "messages"):
        moment, given = _time(message.time_created, now)
        out.append((message, moment, given))
    return out


def shorten(text: str, limit: int) -> str:
    """Long texts as their head and tail (what the LLM is shown; the stored text stays whole)."""
    if limit <= 0 or len(text) < limit:
        return text
    half = limit // 2
    return f"{text[:half]} ... {text[-half:]}"


class InfoFilterOp(PersonalOp[InfoFilterParams]):
    prompts = {"info_filter": {"user_name", "count", "sentences"}}
    inputs = (*PersonalOp.inputs, fields.TRAJECTORIES, common_fields.MESSAGES, fields.USER_NAME)
    writes = (keys.STATEMENTS,)

    async def run(self, ctx: ServiceContext) -> None:
        collected = collect_messages(ctx)
        if not collected:
            raise InvalidRequestError(
                "nothing to summarise: send 'trajectories' (a list of {messages}) or 'messages'",
                details={"field": "trajectories"},
            )
        candidates = [
            Statement(text=m.text.strip(), time=moment, time_given=given, score=0, metadata=dict(m.metadata))
            for m, moment, given in collected
            if m.role == Role.USER and m.text.strip() and not m.metadata.get("memorized")
        ]
        llm = ctx.services.llm(self.params.llm)
        if candidates and llm.available:
            groups = batches(candidates, self.params.batch_size)
            await run_all((self._score(ctx, group) for group in groups), limit=self.params.concurrency)
        elif candidates:
            ctx.without_llm(self.name)
            for statement in candidates:
                statement.score = info_score(statement.text)
        preserved = {int(c) for c in self.params.preserved_scores if c.isdigit()}
        kept = [s for s in candidates if s.score in preserved]
        ctx[keys.STATEMENTS] = kept
        ctx.response.metadata["info_filter"] = {
            "messages": len(collected),
            "candidates": len(candidates),
            "kept": len(kept),
        }

    async def _score(self, ctx: ServiceContext, group: list[Statement]) -> None:
        name = user_name(ctx)
        lines = [
            f"{i}. {name}: {shorten(s.text, self.params.info_filter_msg_max_size)}" for i, s in enumerate(group, 1)
        ]
        prompt = self.render(ctx, "info_filter", user_name=name, count=len(group), sentences="\n".join(lines))
        llm = ctx.services.llm(self.params.llm)
        scores: dict[int, int] = await chat_parsed(
            llm,
            [Message(role=Role.USER, content=prompt)],
            lambda reply: parse_scores(reply, len(group)),
            what="information scores",
        )
        for i, statement in enumerate(group, 1):
            statement.score = scores[i]
