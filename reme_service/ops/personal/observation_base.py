"""What GetObservationOp and GetObservationWithTimeOp share: turning kept statements into observations.

The statements of `STATEMENTS` are split by whether they mention time (`has_time_word`): the plain op takes
those that do not, the with-time op those that do. With an LLM, statements go in batches of `batch_size`; the
reply contract is one `Information:` line per observation and at least one per message (`None` when it says
nothing about the user); a reply that leaves a message without a line is re-asked, then fails the request
(502). Without an LLM, each statement becomes one observation: its
statements with the questions removed, in the user's own words, with rule-based keywords; the with-time op
resolves the first time expression against the message's time ("yesterday" said on 2023-05-08 → 2023-05-07).
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from reme_service.concurrency import run_all
from reme_service.flow.context import Key
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.personal import fields, keys
from reme_service.ops.personal.line_format import parse_observations
from reme_service.ops.personal.memories import (
    RULES_AUTHOR,
    Statement,
    batches,
    language,
    new_observation,
    user_name,
)
from reme_service.ops.personal.op import PersonalOp
from reme_service.ops.personal.rules import keywords, observation_text
from reme_service.providers.llm.structured import chat_parsed
from reme_service.retrieval.time_expressions import find_time_spans, has_time_word
from reme_service.retrieval.timespan import TimeSpan, format_moment, parse_span_answer
from reme_service.schema.memory import PersonalMemory
from reme_service.schema.messages import Message, Role


class ObservationParams(OpParams):
    batch_size: int = 20
    concurrency: int = 4
    msg_max_size: int = 2000
    llm: str = "default"


def resolve_time(text: str, moment: datetime) -> TimeSpan | None:
    """A period from an LLM's time answer: a machine date (`2023-05-07`), else the first expression in it."""
    if not text:
        return None
    span = parse_span_answer(text)
    if span is not None:
        return span
    spans = find_time_spans(text, moment)
    return spans[0].with_text(text) if spans else None


class ObservationBaseOp(PersonalOp[ObservationParams]):
    """Not registered itself; subclasses set the class variables and declare `writes = (output_key,)`."""

    inputs = (*PersonalOp.inputs, fields.USER_NAME)
    may_read = (keys.STATEMENTS,)
    with_time: ClassVar[bool] = False
    prompt_name: ClassVar[str] = ""
    output_key: ClassVar[Key[list[PersonalMemory]]]

    async def run(self, ctx: ServiceContext) -> None:
        statements = [s for s in ctx.get(keys.STATEMENTS, []) if has_time_word(s.text) == self.with_time]
        target = user_name(ctx)
        memories: list[PersonalMemory] = []
        llm = ctx.services.llm(self.params.llm)
        if statements and llm.available:
            groups = batches(statements, self.params.batch_size)
            results = await run_all((self._extract(ctx, g, target) for g in groups), limit=self.params.concurrency)
            memories = [m for result in results for m in result]
        elif statements:
            ctx.without_llm(self.name)
            memories = [self._from_rules(s, target) for s in statements]
        ctx[self.output_key] = memories

    def _from_rules(self, statement: Statement, target: str) -> PersonalMemory:
        content = observation_text(statement.text)
        span = None
        if self.with_time:
            spans = find_time_spans(statement.text, statement.time)
            span = spans[0] if spans else None
        return new_observation(
            statement,
            content=content,
            keywords=keywords(content),
            target=target,
            author=RULES_AUTHOR,
            ordinal=0,
            span=span,
        )

    def _line(self, index: int, statement: Statement, target: str, lang: str) -> str:
        text = statement.text[: self.params.msg_max_size]
        if self.with_time:
            return f"{index}. [{format_moment(statement.time, lang)}] {target}: {text}"
        return f"{index}. {target}: {text}"

    async def _extract(self, ctx: ServiceContext, group: list[Statement], target: str) -> list[PersonalMemory]:
        lang = language(ctx)
        lines = "\n".join(self._line(i, s, target, lang) for i, s in enumerate(group, 1))
        prompt = self.render(ctx, self.prompt_name, user_name=target, count=len(group), sentences=lines)
        llm = ctx.services.llm(self.params.llm)
        found = await chat_parsed(
            llm,
            [Message(role=Role.USER, content=prompt)],
            lambda reply: parse_observations(reply, len(group), with_time=self.with_time),
            what="observations",
        )
        ordinals: dict[int, int] = {}
        memories = []
        for obs in found:
            statement = group[obs.index - 1]
            ordinal = ordinals[obs.index] = ordinals.get(obs.index, -1) + 1
            span = resolve_time(obs.time_text, statement.time) if self.with_time else None
            memories.append(
                new_observation(
                    statement,
                    content=obs.content,
                    keywords=obs.keywords or keywords(obs.content),
                    target=target,
                    author=llm.model_name,
                    ordinal=ordinal,
                    span=span,
                    time_info=obs.time_text,
                )
            )
        return memories
