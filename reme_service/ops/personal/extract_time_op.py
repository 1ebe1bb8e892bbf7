"""ExtractTimeOp: the period a query asks about, read against the query's time (key `TIME_SPAN`).

The rules run first (`find_time_spans`: "last week", "in May 2023", "昨天", ...); several periods in one query
are joined into one span from the first start to the last end. When the rules find nothing although the query
mentions time ("around the holidays"), the LLM is asked, if one is configured and `enable_llm` is on. Reply
contract: one line `Time: <YYYY-MM-DD | YYYY-MM | YYYY | YYYY-MM-DD..YYYY-MM-DD | none>`; without that line the
LLM is asked again, then the request fails (502). `metadata.time_extraction` says what was found and how
(`rules` or `llm`), or is null.
"""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common import keys as common_keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.personal import keys
from reme_service.ops.personal.line_format import parse_time
from reme_service.ops.personal.memories import language
from reme_service.ops.personal.observation_base import resolve_time
from reme_service.ops.personal.op import PersonalOp
from reme_service.providers.llm.structured import chat_parsed
from reme_service.retrieval.time_expressions import find_time_spans, has_time_word, off_loop_for
from reme_service.retrieval.timespan import TimeSpan, format_moment
from reme_service.schema.messages import Message, Role


class ExtractTimeParams(OpParams):
    enable_llm: bool = True
    llm: str = "default"


class ExtractTimeOp(PersonalOp[ExtractTimeParams]):
    prompts = {"extract_time": {"query", "query_time"}}
    reads = (common_keys.QUERY, keys.QUERY_TIME)
    writes = (keys.TIME_SPAN,)

    async def run(self, ctx: ServiceContext) -> None:
        query, moment = ctx[common_keys.QUERY], ctx[keys.QUERY_TIME]
        spans = await off_loop_for(ctx.services.regex_lane, find_time_spans, query, moment)
        span: TimeSpan | None = None
        method = "rules"
        if spans:
            span = TimeSpan(min(s.start for s in spans), max(s.end for s in spans), ", ".join(s.text for s in spans))
        elif self.params.enable_llm and has_time_word(query):
            llm = ctx.services.llm(self.params.llm)
            if llm.available:
                method = "llm"
                span = await self._ask(ctx, query)
            else:
                ctx.without_llm(self.name)
        ctx[keys.TIME_SPAN] = span
        ctx.response.metadata["time_extraction"] = {**span.to_dict(), "method": method} if span else None

    async def _ask(self, ctx: ServiceContext, query: str) -> TimeSpan | None:
        moment = ctx[keys.QUERY_TIME]
        prompt = self.render(ctx, "extract_time", query=query, query_time=format_moment(moment, language(ctx)))
        answer = await chat_parsed(
            ctx.services.llm(self.params.llm),
            [Message(role=Role.USER, content=prompt)],
            parse_time,
            what="time answer",
        )
        return resolve_time(answer, moment)
