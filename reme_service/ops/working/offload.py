"""Offloading a message list: the request knobs, the `compact` / `compress` / `auto` orchestration, and the
snapshot makers (LLM or extractive). Shared by `MessageOffloadOp` and the agent loop of `AgenticRetrieveOp`.

Modes (ReMe 0.2 §8.4):

* `compact` — compaction only (see `compaction.py`);
* `compress` — compression only (see `compression.py`);
* `auto` (default) — compaction first; when the candidates were over `max_total_tokens` and compaction left more
  than `compact_ratio_threshold` of the tokens (`tokens(after) / tokens(before)`, all messages), the *compacted*
  list is compressed as well. ReMe compressed the original list instead, throwing the compaction files away and
  burying large tool outputs in one JSON line of an archive; compressing the compacted list keeps them as
  readable `.txt` files (which grep/read can page through) and keeps the snapshot prompt small.

Request defaults (as in ReMe 0.2's code): mode `auto`, `compact_ratio_threshold` 0.75, `max_total_tokens` 20000,
`max_tool_message_tokens` 2000, `group_token_threshold` none (one group), `keep_recent_count` 10, `store_dir` ""
(the working-memory root itself), `chat_id` a new uuid4 hex, `preview_char_length` 0.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Generic, Protocol, TypeVar

from pydantic import Field, PrivateAttr, model_validator

from reme_service.concurrency import run_all
from reme_service.errors import ConfigError, InvalidRequestError
from reme_service.flow.op import OpParams
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.transcript import render_transcript
from reme_service.ops.working import fields
from reme_service.ops.working.compaction import CompactSettings, FileNamer, OffloadResult, compact_messages
from reme_service.ops.working.compression import (
    CompressionPlan,
    CompressSettings,
    assemble,
    extract_snapshot,
    extractive_snapshot,
    plan_compression,
)
from reme_service.ops.working.paths import safe_stem
from reme_service.ops.working.token_count import TokenCounter, make_token_counter
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.messages import Message, Role
from reme_service.state.interfaces import WorkingFiles

MODES = ("compact", "compress", "auto")
Snapshotter = Callable[[list[Message], CompressionPlan], Coroutine[Any, Any, str]]


class OffloadParams(OpParams):
    """Op parameters shared by the ops that offload: which LLM writes snapshots, how tokens are counted."""

    llm: str = "default"
    token_counter: str = Field(default="heuristic", description="heuristic, minilm or tokenizer:<path>")
    max_concurrency: int = Field(default=4, ge=1, description="snapshot LLM calls in flight at once")

    _counter: TokenCounter = PrivateAttr()

    @model_validator(mode="after")
    def _build_counter(self) -> OffloadParams:
        try:
            self._counter = make_token_counter(self.token_counter)
        except ConfigError as exc:
            raise ValueError(exc.message) from None
        return self

    @property
    def counter(self) -> TokenCounter:
        """The token counter, built once when the flow is loaded."""
        return self._counter


@dataclass(frozen=True)
class OffloadRequest:
    """The offload knobs of one request, checked."""

    mode: str
    compact_ratio_threshold: float
    compact: CompactSettings
    compress: CompressSettings


def caller_dir(store_dir: str) -> str:
    """A `store_dir` on the caller's own disk, as a POSIX folder path ("" and "." = the caller's working
    directory): kept as sent but for `./` and trailing slashes, since the service never opens it."""
    folder = str(PurePosixPath(store_dir)) if store_dir else ""
    return "" if folder == "." else folder


def read_request(ctx: ServiceContext, root: WorkingFiles | None) -> OffloadRequest:
    """The knobs from the request fields (`fields.OFFLOAD_INPUTS`, range-checked by the request model); 400 for
    an unknown mode, 403 for a `store_dir` outside the root. `root` None: the caller writes the files, and
    `store_dir` is a folder of its own disk (`caller_dir`)."""
    mode = ctx.input(fields.WORKING_SUMMARY_MODE) or "auto"
    if mode not in MODES:
        raise InvalidRequestError(
            f"invalid working_summary_mode {mode!r}; valid modes: {', '.join(MODES)}", details={"valid": list(MODES)}
        )
    keep = ctx.input(fields.KEEP_RECENT_COUNT)
    given = ctx.input(fields.STORE_DIR)
    store_dir = root.normalise_dir(given) if root is not None else caller_dir(given)
    chat_id = safe_stem(ctx.input(fields.CHAT_ID)) or uuid.uuid4().hex
    max_total = ctx.input(fields.MAX_TOTAL_TOKENS)
    return OffloadRequest(
        mode=mode,
        compact_ratio_threshold=ctx.input(fields.COMPACT_RATIO_THRESHOLD),
        compact=CompactSettings(
            max_total_tokens=max_total,
            max_tool_message_tokens=ctx.input(fields.MAX_TOOL_MESSAGE_TOKENS),
            keep_recent_count=keep,
            store_dir=store_dir,
            preview_char_length=ctx.input(fields.PREVIEW_CHAR_LENGTH),
        ),
        compress=CompressSettings(
            max_total_tokens=max_total,
            group_token_threshold=ctx.input(fields.GROUP_TOKEN_THRESHOLD) or None,
            keep_recent_count=keep,
            store_dir=store_dir,
            chat_id=chat_id,
        ),
    )


class Disk(Protocol):
    """What the offload steps may ask the disk the files will be written to."""

    def is_free(self, rel: str, text: str) -> bool:
        """True when the file `rel` may be (over)written with `text`."""
        ...

    def first_archive_index(self, store_dir: str, chat_id: str) -> int:
        """The index of the first new `<chat_id>_<n>.json` archive in `store_dir`."""
        ...


class CallerDisk:
    """The disk of a caller that writes the files itself (`summary_working_memory_for_as`): the service cannot
    see it, so every name is free and archives are numbered from 0, as ReMe 0.2 numbered them."""

    def is_free(self, rel: str, text: str) -> bool:
        return True

    def first_archive_index(self, store_dir: str, chat_id: str) -> int:
        return 0


Files = TypeVar("Files", bound=WorkingFiles)


class DiskView(Generic[Files]):
    """The caller's working-memory files (`WorkingFiles`: this machine's disk, or the shared table) as a `Disk`: is
    a file name free, which archive index comes next."""

    def __init__(self, root: Files) -> None:
        self.root = root

    def is_free(self, rel: str, text: str) -> bool:
        """True when the file does not exist or already holds exactly `text` (403 if it resolves outside)."""
        return self.root.is_free(rel, text)

    def first_archive_index(self, store_dir: str, chat_id: str) -> int:
        """One past the highest `<chat_id>_<n>.json` in the folder (0 when there is none)."""
        used = self.root.archive_indices(store_dir, f"{chat_id}_", ".json")
        return max(used) + 1 if used else 0


@dataclass
class OffloadOutcome:
    messages: list[Message]
    files: dict[str, str] = field(default_factory=dict)
    applied: str = "none"  # none | compact | compress | compact+compress
    tokens_before: int = 0
    tokens_after: int = 0
    compact_ratio: float | None = None

    def summary(self, request: OffloadRequest, counter: TokenCounter) -> dict[str, Any]:
        return {
            "mode": request.mode,
            "applied": self.applied,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "compact_ratio": self.compact_ratio,
            "token_counter": counter.name,
            "store_dir": request.compact.store_dir,
            "chat_id": request.compress.chat_id,
            "files": list(self.files),
        }


def llm_snapshotter(ctx: ServiceContext, params: OffloadParams, prompt_file: Path) -> Snapshotter:
    """Snapshots written by the LLM (template `compress` of `prompt_file`, i.e. `MessageOffloadOp.prompt_file`);
    re-asked when the reply has no `<state_snapshot>` block, then `LLMError` (502) — never an empty or invented
    summary."""
    llm = ctx.services.llm(params.llm)
    gate = asyncio.Semaphore(params.max_concurrency)

    def render(group: list[Message]) -> str:
        transcript = render_transcript(group)
        return ctx.services.prompts.render(prompt_file, "compress", ctx.language, transcript=transcript)

    async def snapshot(group: list[Message], plan: CompressionPlan) -> str:
        prompt = await asyncio.to_thread(render, group)  # a long group's transcript is megabytes of text
        async with gate:
            return await chat_parsed(
                llm, [Message(role=Role.USER, content=prompt)], extract_snapshot, what="state snapshot"
            )

    return snapshot


async def extractive_snapshotter(group: list[Message], plan: CompressionPlan) -> str:
    return await asyncio.to_thread(extractive_snapshot, group, plan.goal, plan.tool_results)


async def _compress(
    messages: list[Message],
    request: OffloadRequest,
    counter: TokenCounter,
    snapshot: Snapshotter,
    disk: Disk,
    *,
    force: bool,
) -> OffloadResult:
    settings = request.compress
    first = await asyncio.to_thread(disk.first_archive_index, settings.store_dir, settings.chat_id)
    plan = await asyncio.to_thread(plan_compression, messages, settings, counter, first_index=first, force=force)
    if plan is None:
        return OffloadResult(messages=messages)
    snapshots = await run_all([snapshot(group, plan) for group in plan.groups])
    return OffloadResult(messages=assemble(plan, snapshots), files=dict(plan.archives), applied=True)


async def offload(
    messages: list[Message], request: OffloadRequest, counter: TokenCounter, snapshot: Snapshotter, disk: Disk
) -> OffloadOutcome:
    """Apply the request's mode to `messages` (see the module docstring). Writes nothing."""
    before = await asyncio.to_thread(counter.count_messages, messages)
    outcome = OffloadOutcome(messages=messages, tokens_before=before, tokens_after=before)
    if request.mode == "compress":
        result = await _compress(messages, request, counter, snapshot, disk, force=False)
        applied = "compress" if result.applied else "none"
    else:
        namer = FileNamer(disk.is_free)
        result = await asyncio.to_thread(compact_messages, messages, request.compact, counter, namer)
        applied = "compact" if result.applied else "none"
        if request.mode == "auto" and result.over_budget and before > 0:
            after = await asyncio.to_thread(counter.count_messages, result.messages)
            outcome.compact_ratio = round(after / before, 4)
            if outcome.compact_ratio > request.compact_ratio_threshold:
                compressed = await _compress(result.messages, request, counter, snapshot, disk, force=True)
                if compressed.applied:
                    files = {**result.files, **compressed.files}
                    result = OffloadResult(messages=compressed.messages, files=files, applied=True)
                    applied = "compact+compress" if applied == "compact" else "compress"
    if applied == "none":
        return outcome
    outcome.messages, outcome.files, outcome.applied = result.messages, result.files, applied
    outcome.tokens_after = await asyncio.to_thread(counter.count_messages, result.messages)
    return outcome
