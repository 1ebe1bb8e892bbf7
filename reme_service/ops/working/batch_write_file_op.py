"""BatchWriteFileOp: write the files the offload step produced, atomically, inside the working-memory root.

Reads the context's `write_file_dict` (`{root-relative path: text}`). Every path is checked against the root
again (403 outside), every file is written to a temp file, fsynced and renamed over its target only once all of
them are on disk; a failure fails the request (503; 409 when a path needs a folder where a file is, or the
reverse) and leaves no partial file — unlike ReMe 0.2, which
ignored write errors while the answer already pointed at the missing files. `metadata.written_files` lists them.
"""

from __future__ import annotations

import asyncio

from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.working import keys


class BatchWriteFileOp(ServiceOp[OpParams]):
    may_read = (keys.WRITE_FILE_DICT,)

    async def run(self, ctx: ServiceContext) -> None:
        files = ctx.get(keys.WRITE_FILE_DICT, {})
        written = await asyncio.to_thread(ctx.working_files.write, files, ctx.trail) if files else []
        ctx.response.metadata["written_files"] = written
