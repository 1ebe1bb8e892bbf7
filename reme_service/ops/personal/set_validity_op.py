"""SetValidityOp: which facts retrieval keeps (`VALIDITY`), from the request's `as_of` and `include_invalid`
(`lifecycle.py`).

`as_of` (validated in the request model like `query_time`: a bad value is a 422 naming it) keeps the facts valid at
that time; without it, the facts valid now; `include_invalid` sets `VALIDITY` to None, so invalidated, expired and
not-yet-valid facts are retrieved too. A flow without this op filters nothing (the retrieval ops read `VALIDITY`
only when present).
"""

from __future__ import annotations

from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.personal import fields, keys
from reme_service.ops.personal.lifecycle import Validity
from reme_service.retrieval.timespan import TIME_FORMAT
from reme_service.retrieval.timestamps import parse_timestamp


class SetValidityOp(ServiceOp[OpParams]):
    inputs = (fields.AS_OF, fields.INCLUDE_INVALID)
    writes = (keys.VALIDITY,)

    async def run(self, ctx: ServiceContext) -> None:
        given = ctx.input(fields.AS_OF)
        as_of = parse_timestamp(given) if given else None
        ctx[keys.VALIDITY] = None if ctx.input(fields.INCLUDE_INVALID) else Validity(as_of)
        if as_of is not None:
            ctx.response.metadata["as_of"] = as_of.strftime(TIME_FORMAT)
