"""Run a validated flow for one request: a fresh op tree, per-op timing, failures that name flow and op."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from reme_service.errors import OpError, ReMeError
from reme_service.flow.context import FlowContext, FlowResponse
from reme_service.flow.op import Node, Op, Parallel, Sequential
from reme_service.stores.base import validate_workspace_id

if TYPE_CHECKING:
    from reme_service.config.models import FlowConfig
    from reme_service.schema.requests import FlowRequest
    from reme_service.services import Services

logger = logging.getLogger("reme_service.flow")


class FlowRunner:
    """One flow: its config, its parsed op tree (a template) and its request model."""

    def __init__(self, name: str, config: FlowConfig, tree: Node, request_model: type[FlowRequest]) -> None:
        self.name = name
        self.config = config
        self.tree = tree
        self.request_model = request_model

    async def run(self, request: FlowRequest, *, services: Services, request_id: str) -> FlowResponse:
        """Execute the flow. Raises a `ReMeError` (usually an `OpError`) on failure."""
        fields = request.model_dump(exclude_none=True)
        workspace = validate_workspace_id(request.workspace_id or services.config.default_workspace)
        ctx = FlowContext(
            flow_name=self.name,
            request_id=request_id,
            fields=fields,
            services=services,
            workspace_id=workspace,
            language=services.config.language,
        )
        started = time.perf_counter()
        await self._execute(self.tree, ctx)
        logger.debug("[%s] flow %s done in %.2f ms", request_id, self.name, (time.perf_counter() - started) * 1e3)
        return ctx.response

    async def _execute(self, node: Node, ctx: FlowContext) -> None:
        if isinstance(node, Sequential):
            for child in node.children:
                await self._execute(child, ctx)
        elif isinstance(node, Parallel):
            try:
                async with asyncio.TaskGroup() as group:
                    for child in node.children:
                        group.create_task(self._execute(child, ctx))
            except* ReMeError as errors:
                raise errors.exceptions[0] from None
        else:
            assert isinstance(node, Op)
            await self._run_op(node, ctx)

    async def _run_op(self, template: Op, ctx: FlowContext) -> None:
        op = type(template).from_params(template.params)
        started = time.perf_counter()
        try:
            await op.run(ctx)
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
            elapsed = (time.perf_counter() - started) * 1e3
            logger.debug("[%s] %s.%s %.2f ms", ctx.request_id, self.name, op.name, elapsed)


def describe(tree: Node) -> dict[str, Any]:
    """A JSON-able summary of a flow tree (for /health and logs)."""
    return {"expression": repr(tree), "ops": [op.name for op in tree.ops()]}
