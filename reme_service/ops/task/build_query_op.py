"""BuildQueryOp: decide the retrieval query — the request's `query`, else one derived from `messages`."""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common import fields, keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.common.query_limit import limited_query
from reme_service.ops.common.transcript import recent_lines, render_transcript
from reme_service.schema.messages import Message, Role


class BuildQueryParams(OpParams):
    enable_llm_build: bool = True
    llm: str = "default"


EMPTY_QUERY_WARNING = "the query was empty, so nothing was retrieved: send a non-empty 'query' or 'messages'"


class BuildQueryOp(ServiceOp[BuildQueryParams]):
    prompts = {"build_query": {"transcript"}}
    inputs = (fields.QUERY, fields.MESSAGES)
    writes = (keys.QUERY,)

    async def run(self, ctx: ServiceContext) -> None:
        params = self.params
        query = ctx.input(fields.QUERY).strip()
        messages = ctx.input(fields.MESSAGES)
        if not query and messages:
            llm = ctx.services.llm(params.llm)
            if params.enable_llm_build and llm.available:
                prompt = self.render(ctx, "build_query", transcript=render_transcript(messages, limit=2000))
                reply = await llm.chat([Message(role=Role.USER, content=prompt)])
                query = reply.text.strip()
            else:
                if params.enable_llm_build:
                    ctx.without_llm(self.name)
                query = "Recent messages:\n" + recent_lines(messages)
        ctx[keys.QUERY] = query = limited_query(ctx, query)
        if not query:  # as ReMe 0.2: an empty answer, not an error; the warning says why
            ctx.response.answer = ""
            ctx.response.metadata.update(memory_list=[], warning=EMPTY_QUERY_WARNING)
            ctx.finish()
