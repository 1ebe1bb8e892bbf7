"""ReadFileOp: read lines of a working-memory file (`read_working_memory`), in Python, inside the root.

Request fields: `file_path` (relative to the working-memory root), `offset` (0-based first line, default 0),
`limit` (number of lines, default/0 = to the end). The answer is the lines joined by newlines;
`metadata.read` gives the first line number, the count and whether more lines follow. A missing file is 404, an
offset past the end 400, a path outside the root 403 (ReMe 0.2 ran `sed` on any path and answered errors with an
empty success).
"""

from __future__ import annotations

import asyncio

from reme_service.flow.context import FlowContext
from reme_service.flow.op import Op
from reme_service.ops.working.file_tools import read_file
from reme_service.ops.working.paths import WorkingRoot


class ReadFileOp(Op):
    async def run(self, ctx: FlowContext) -> None:
        root = WorkingRoot(ctx.services.config.working_memory_root)
        result = await asyncio.to_thread(
            read_file,
            root,
            str(ctx.field("file_path", "")),
            offset=int(ctx.field("offset", 0)),
            limit=int(ctx.field("limit", 0)),
        )
        ctx.response.answer = result.text
        ctx.response.metadata["read"] = {
            "file_path": result.path,
            "start_line": result.start_line,
            "lines": result.lines,
            "has_more": result.has_more,
        }
