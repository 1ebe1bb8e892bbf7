"""SetValidityOp: the moment retrieved facts must hold at (`VALID_AT`), from the request's `as_of` and
`include_invalid` (`lifecycle.py`).

`as_of` (validated in the request model like `query_time`: a bad value is a 422 naming it) defaults to the query
time; `include_invalid` sets `VALID_AT` to None, so invalidated, expired and not-yet-valid facts are retrieved too.
A flow without this op filters nothing (the retrieval ops read `VALID_AT` only when present).
"""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.personal import fields, keys
from reme_service.ops.personal.timespan import TIME_FORMAT
from reme_service.ops.personal.timestamps import parse_timestamp


class SetValidityOp(ServiceOp[OpParams]):
    inputs = (fields.AS_OF, fields.INCLUDE_INVALID)
    reads = (keys.QUERY_TIME,)
    writes = (keys.VALID_AT,)

    async def run(self, ctx: ServiceContext) -> None:
        as_of = ctx.input(fields.AS_OF)
        moment = parse_timestamp(as_of) if as_of else ctx[keys.QUERY_TIME]
        ctx[keys.VALID_AT] = None if ctx.input(fields.INCLUDE_INVALID) else moment
        if as_of:
            ctx.response.metadata["as_of"] = moment.strftime(TIME_FORMAT)
