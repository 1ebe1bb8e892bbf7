"""BuildQueryOp: decide the retrieval query — the request's `query`, else one derived from `messages`."""

from __future__ import annotations

from typing import ClassVar

from reme_service.errors import InvalidRequestError
from reme_service.flow import keys
from reme_service.flow.context import FlowContext
from reme_service.flow.op import Op, OpParams
from reme_service.ops.task.transcript import recent_lines, render_transcript
from reme_service.prompts.loader import prompt_file_for
from reme_service.schema.messages import Message

PROMPTS = prompt_file_for(__file__)


class BuildQueryParams(OpParams):
    enable_llm_build: bool = True
    llm: str = "default"


class BuildQueryOp(Op):
    Params: ClassVar[type[OpParams]] = BuildQueryParams
    prompts: ClassVar[dict[str, set[str]]] = {"build_query": {"transcript"}}
    params: BuildQueryParams

    async def run(self, ctx: FlowContext) -> None:
        params = self.params
        query = str(ctx.field("query", "")).strip()
        messages: list[Message] = [Message.model_validate(m) for m in ctx.field("messages", [])]
        if not query and messages:
            llm = ctx.services.llm(params.llm)
            if params.enable_llm_build and llm.available:
                prompt = ctx.services.prompts.render(
                    PROMPTS, "build_query", ctx.language, transcript=render_transcript(messages, limit=2000)
                )
                reply = await llm.chat([Message(role="user", content=prompt)])
                query = reply.text.strip()
            else:
                if params.enable_llm_build:
                    ctx.without_llm(self.name)
                query = "Recent messages:\n" + recent_lines(messages)
        if not query:
            raise InvalidRequestError("query must not be empty (send a non-empty 'query' or 'messages')")
        ctx[keys.QUERY] = query
