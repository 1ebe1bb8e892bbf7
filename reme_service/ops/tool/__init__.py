"""Tool-memory ops: recording and judging tool calls, usage guidelines, retrieval, and the mock search tools."""

from __future__ import annotations

from reme_service.flow.op import AnyOp
from reme_service.ops.tool.parse_tool_call_result_op import ParseToolCallResultOp
from reme_service.ops.tool.retrieve_tool_memory_op import RetrieveToolMemoryOp
from reme_service.ops.tool.summary_tool_memory_op import SummaryToolMemoryOp
from reme_service.ops.tool.use_mock_search_op import UseMockSearchOp

TOOL_OPS: tuple[type[AnyOp], ...] = (
    ParseToolCallResultOp,
    SummaryToolMemoryOp,
    RetrieveToolMemoryOp,
    UseMockSearchOp,
)
