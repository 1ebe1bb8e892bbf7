"""GrepOp: search a working-memory file with a regular expression (`grep_working_memory`).

Request fields: `file_path` (relative to the working-memory root, as the offload placeholders print it),
`pattern` (a Python regular expression; `literal: true` searches for the text as is), `limit` (most lines to
return, default 50), `case_sensitive` (default false). The answer holds `<path>:<line number>:<line>` lines, or
`No matches found for pattern "<p>" in file_path "<path>".`; `metadata.grep` says how many lines matched and
whether the limit cut the list. ReMe 0.2 searched literally despite promising regular expressions and answered
every failure with an empty success; here a missing file is 404, a bad pattern 400 and a path outside the root 403.
Matching may take `grep_timeout` seconds per request (op parameter, default 1 s): a pattern that backtracks
catastrophically answers 400 ("the pattern took longer than ...; simplify it") instead of holding a worker.
"""

from __future__ import annotations

from pydantic import Field

from reme_service.flow.context import Input
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.working import fields
from reme_service.ops.working.file_tools import DEFAULT_GREP_TIMEOUT, grep_file

PATTERN: Input[str] = Input("pattern", str, default="")
LIMIT: Input[int] = Input("limit", int, default=50)
LITERAL: Input[bool] = Input("literal", bool, default=False)
CASE_SENSITIVE: Input[bool] = Input("case_sensitive", bool, default=False)


class GrepParams(OpParams):
    max_line_chars: int = Field(default=2000, ge=1, description="longer matching lines are shortened")
    grep_timeout: float = Field(
        default=DEFAULT_GREP_TIMEOUT, gt=0, le=60, description="seconds of regex matching a request may spend in all"
    )


class GrepOp(ServiceOp[GrepParams]):
    inputs = (fields.FILE_PATH, PATTERN, LIMIT, LITERAL, CASE_SENSITIVE)
    not_found = "the file does not exist in the working-memory root"

    async def run(self, ctx: ServiceContext) -> None:
        root = ctx.working_files
        result = await ctx.services.regex_lane.run(
            grep_file,
            root,
            ctx.input(fields.FILE_PATH),
            ctx.input(PATTERN),
            limit=ctx.input(LIMIT),
            literal=ctx.input(LITERAL),
            case_sensitive=ctx.input(CASE_SENSITIVE),
            max_line_chars=self.params.max_line_chars,
            timeout=self.params.grep_timeout,
        )
        ctx.response.answer = result.text
        ctx.response.metadata["grep"] = {
            "file_path": result.path,
            "matches": result.matches,
            "truncated": result.truncated,
        }
