"""The answer of the tool-memory flows when none of the asked tools has a memory."""

from __future__ import annotations

from reme_service.ops.common.context import ServiceContext

NO_MEMORY_ANSWER = "No matching tool memories found"


def no_memory(ctx: ServiceContext, names: list[str]) -> None:
    """ReMe 0.2's `success: false` with its answer text (HTTP 200: its clients check `success` before reading
    `memory_list[0]`), and the reason as `metadata.error` (code `not_found`), which the clients here raise as
    `NotFoundError`."""
    ctx.response.success = False
    ctx.response.answer = NO_MEMORY_ANSWER
    message = f"no tool memory for {', '.join(names)}; add_tool_call_result records calls first"
    ctx.response.metadata["error"] = {"code": "not_found", "message": message, "request_id": ctx.request_id}
