"""SetQueryOp: the query, the time it is asked at, and whose memories to search.

* query: the request's `query`, else the text of the last user message of `messages`; empty is a 400.
* query time: the request's `query_time` (validated in the request model: a bad value is a 422), else the
  `time_created` of that last message, else the op param `timestamp` (epoch seconds, ReMe's param), else now.
  Relative times in the query ("last week") are read against it.
* user: the request's `user_name` when given — only that user's memories are searched — else every user's
  personal memories in the workspace (what ReMe 0.2 clients that never send `user_name` expect).
"""

from __future__ import annotations

from datetime import datetime

from reme_service.flow.op import OpParams
from reme_service.ops.common import fields as common_fields, keys as common_keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.common.query_limit import limited_query
from reme_service.ops.personal import fields, keys
from reme_service.ops.personal.timed_messages import PersonalMessage, personal_items
from reme_service.retrieval.timespan import TIME_FORMAT
from reme_service.retrieval.timestamps import parse_timestamp
from reme_service.schema.messages import Role

EMPTY_QUERY_WARNING = (
    "the query was empty, so nothing was retrieved: send a non-empty 'query' or a user message in 'messages'"
)


class SetQueryParams(OpParams):
    timestamp: int | None = None


class SetQueryOp(ServiceOp[SetQueryParams]):
    inputs = (common_fields.QUERY, common_fields.MESSAGES, fields.QUERY_TIME, fields.USER_NAME)
    writes = (common_keys.QUERY, keys.QUERY_TIME, keys.TARGET)

    async def run(self, ctx: ServiceContext) -> None:
        query = ctx.input(common_fields.QUERY).strip()
        given = ctx.input(common_fields.MESSAGES)
        messages = personal_items(PersonalMessage, given, "messages")
        last = next((m for m in reversed(messages) if m.role == Role.USER and m.text.strip()), None)
        if not query and last is not None:
            query = last.text.strip()
        ctx[common_keys.QUERY] = query = limited_query(ctx, query)
        if not query:  # as ReMe 0.2: an empty answer, not an error; the warning says why
            ctx.response.answer = ""
            ctx.response.metadata.update(memory_list=[], warning=EMPTY_QUERY_WARNING)
            ctx.finish()
            return
        ctx[keys.QUERY_TIME] = self._query_time(ctx, last)
        target = ctx.input(fields.USER_NAME).strip()
        ctx[keys.TARGET] = target or None
        ctx.response.metadata["query_time"] = ctx[keys.QUERY_TIME].strftime(TIME_FORMAT)

    def _query_time(self, ctx: ServiceContext, last: PersonalMessage | None) -> datetime:
        given = ctx.input(fields.QUERY_TIME)  # normalised by the request model (`Timestamp`)
        if given:
            return parse_timestamp(given)
        if last is not None and last.time_created:
            return parse_timestamp(last.time_created)
        if self.params.timestamp is not None:
            return datetime.fromtimestamp(self.params.timestamp)
        return datetime.now().replace(microsecond=0)
