"""Run a validated flow for one request: a fresh op tree, per-op timing, failures that name flow and op.

The runner knows nothing of what the ops do: the app gives it a context factory, which turns a validated
request into the context the flow's ops take (for the memory ops, `ops.common.context.ServiceContext`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Generic

from pydantic import BaseModel

from reme_service.concurrency import run_all
from reme_service.errors import OpError, ReMeError
from reme_service.flow.check import check_flow
from reme_service.flow.context import C, FlowResponse
from reme_service.flow.current_op import current_op
from reme_service.flow.op import AnyOp, Node, Op, Parallel, Sequential

logger = logging.getLogger("reme_service.flow")

ContextFactory = Callable[[str, str, BaseModel], C]
"""(flow name, request id, validated request) -> the context of one request."""


class FlowRunner(Generic[C]):
    """One flow: its parsed op tree (a template), its request model and the factory of its contexts.

    Construction checks the flow's declarations (`check.check_flow`), so a misdeclared flow never serves.
    """

    def __init__(
        self,
        name: str,
        tree: Node,
        request_model: type[BaseModel],
        make_context: ContextFactory[C],
        *,
        description: str = "",
    ) -> None:
        check_flow(name, tree, request_model)
        self.name = name
        self.tree = tree
        self.request_model = request_model
        self.description = description
        self._make_context = make_context

    async def run(self, request: BaseModel, *, request_id: str, context: C | None = None) -> FlowResponse:
        """Execute the flow. Raises a `ReMeError` (usually an `OpError`) on failure. `context` is one its caller
        made for this request already (the service's, from the request's resolved scope); else the factory's."""
        ctx = context if context is not None else self._make_context(self.name, request_id, request)
        if not logger.isEnabledFor(logging.DEBUG):  # the timings are only logged at DEBUG: not taken below it
            await self._execute(self.tree, ctx, False)
            return ctx.response
        started = time.perf_counter()
        await self._execute(self.tree, ctx, True)
        logger.debug("[%s] flow %s done in %.2f ms", request_id, self.name, (time.perf_counter() - started) * 1e3)
        return ctx.response

    async def _execute(self, node: Node, ctx: C, timed: bool = False) -> None:
        if isinstance(node, Sequential):
            for child in node.children:
                if ctx.finished:  # an op called `ctx.finish()`: the answer is complete
                    return
                await self._execute(child, ctx, timed)
        elif isinstance(node, Parallel):
            await run_all(self._execute(child, ctx, timed) for child in node.children)
        else:
            assert isinstance(node, Op)
            await self._run_op(node, ctx, timed)

    async def _run_op(self, template: AnyOp, ctx: C, timed: bool) -> None:
        op = type(template).from_params(template.params)
        started = time.perf_counter() if timed else 0.0
        token = current_op.set(op.name)
        try:
            await op.run(ctx.bind(op))
        except Exception as exc:  # noqa: BLE001 - every failure is wrapped with flow and op names
            error = exc if isinstance(exc, OpError) else OpError(self.name, op.name, exc)
            if op.params.on_error == "skip":
                logger.warning("[%s] %s: skipped after error: %s", ctx.request_id, op.name, error.message)
                ctx.note("skipped_ops", {"op": op.name, "error": error.to_dict()})
                return
            if error.status >= 500 and not isinstance(exc, ReMeError):
                logger.exception("[%s] %s failed", ctx.request_id, op.name)
            raise error from exc
        finally:
            current_op.reset(token)
            if timed:
                elapsed = (time.perf_counter() - started) * 1e3
                logger.debug("[%s] %s.%s %.2f ms", ctx.request_id, self.name, op.name, elapsed)


def describe(tree: Node) -> dict[str, Any]:
    """A JSON-able summary of a flow tree (for /health and logs)."""
    return {"expression": repr(tree), "ops": [op.name for op in tree.ops()]}
