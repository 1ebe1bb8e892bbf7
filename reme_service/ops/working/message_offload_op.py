"""MessageOffloadOp: keep an agent's message list under a token budget (`summary_working_memory`).

Reads `messages` and the knobs of ReMe 0.2 §8.1 (`working_summary_mode`, `compact_ratio_threshold`,
`max_total_tokens`, `max_tool_message_tokens`, `group_token_threshold`, `keep_recent_count`, `store_dir`,
`chat_id`, `preview_char_length`; defaults and rules in `offload.py`). Writes:

* `answer` — the new message list as ReMe's simple dicts (the input, normalised, when nothing had to change);
* `metadata.write_file_dict` — `{root-relative path: text}` of the files the new list refers to (also put in the
  context for `BatchWriteFileOp`). With `caller_writes` (`summary_working_memory_for_as`) the caller writes them
  on its own disk: `store_dir` is then the caller's folder, kept as sent (an absolute path too, as in ReMe 0.2),
  and the paths are `<store_dir>/<name>`; the service neither opens nor confines them;
* `metadata.working_summary` — mode, what was applied, tokens before/after, the compaction ratio, the counter.

Without an LLM, compression writes an extractive snapshot instead (see `compression.extractive_snapshot`) and the
op is listed in `metadata.no_llm_ops`. With an LLM, a failed or unusable snapshot fails the request (502).
"""

from __future__ import annotations

import asyncio

from pydantic import Field

from reme_service.ops.common import fields as common_fields
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.working import fields, keys
from reme_service.ops.working.message_io import simple_dicts
from reme_service.ops.working.offload import (
    CallerDisk,
    Disk,
    DiskView,
    OffloadParams,
    extractive_snapshotter,
    llm_snapshotter,
    offload,
    read_request,
)


class MessageOffloadParams(OffloadParams):
    caller_writes: bool = Field(
        default=False, description="the caller writes write_file_dict on its own disk: store_dir is its folder"
    )


class MessageOffloadOp(ServiceOp[MessageOffloadParams]):
    prompts = {"compress": {"transcript"}}
    inputs = (common_fields.MESSAGES, *fields.OFFLOAD_INPUTS)
    writes = (keys.WRITE_FILE_DICT,)

    async def run(self, ctx: ServiceContext) -> None:
        disk: Disk
        if self.params.caller_writes:
            request, disk = read_request(ctx, None), CallerDisk()
        else:
            root = ctx.working_files
            request, disk = read_request(ctx, root), DiskView(root)
        messages = ctx.input(common_fields.MESSAGES)
        with_llm = ctx.services.llm(self.params.llm).available
        snapshot = llm_snapshotter(ctx, self.params, self.prompt_file) if with_llm else extractive_snapshotter
        outcome = await offload(messages, request, self.params.counter, snapshot, disk)
        if "compress" in outcome.applied and not with_llm:
            ctx.without_llm(self.name)
        ctx[keys.WRITE_FILE_DICT] = outcome.files
        # 100k messages take ~0.5 s to turn into dicts: not on the event loop
        ctx.response.answer = await asyncio.to_thread(simple_dicts, outcome.messages)
        ctx.response.metadata["write_file_dict"] = outcome.files
        ctx.response.metadata["working_summary"] = outcome.summary(request, self.params.counter)
