"""ReadFileOp: read lines of a working-memory file (`read_working_memory`), in Python, inside the root.

Request fields: `file_path` (relative to the working-memory root), `offset` (0-based first line, default 0),
`limit` (number of lines, default/0 = to the end). The answer is the lines joined by newlines;
`metadata.read` gives the first line number, the count and whether more lines follow. A missing file is 404, an
offset past the end 400, a path outside the root 403 (ReMe 0.2 ran `sed` on any path and answered errors with an
empty success).
"""

from __future__ import annotations

import asyncio

from reme_service.flow.context import Input
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.working import fields
from reme_service.ops.working.file_tools import read_file

OFFSET: Input[int] = Input("offset", int, default=0)
LIMIT: Input[int] = Input("limit", int, default=0)


class ReadFileOp(ServiceOp[OpParams]):
    inputs = (fields.FILE_PATH, OFFSET, LIMIT)
    not_found = "the file does not exist in the working-memory root"

    async def run(self, ctx: ServiceContext) -> None:
        root = ctx.working_files
        result = await asyncio.to_thread(
            read_file,
            root,
            ctx.input(fields.FILE_PATH),
            offset=ctx.input(OFFSET),
            limit=ctx.input(LIMIT),
        )
        ctx.response.answer = result.text
        ctx.response.metadata["read"] = {
            "file_path": result.path,
            "start_line": result.start_line,
            "lines": result.lines,
            "has_more": result.has_more,
        }
