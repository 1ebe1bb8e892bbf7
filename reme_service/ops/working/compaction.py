"""Compaction: large tool outputs among the older messages move to files; a short placeholder stays in context.

`compact_messages` is pure CPU work on `Message` objects (run it in a worker thread); it never touches the disk
except through the `is_free` callback that decides whether a file name may be used.

Rules (ReMe 0.2 §8.2, with our fixes):

1. Candidates are the non-system messages except the last `keep_recent_count`.
2. When the candidates' tokens are ≤ `max_total_tokens`, nothing changes.
3. Otherwise every candidate **tool** message whose own tokens exceed `max_tool_message_tokens` is offloaded: its
   text goes to `<store_dir>/<name>.txt`, where `name` is the sanitised `tool_call_id` (a uuid4 hex when that is
   empty or unusable; `_2`, `_3`, ... appended when the name is already taken by different text), and its content
   becomes ``tool call=<name> result is stored in file path=`<path>` `` plus, when `preview_char_length > 0`, a
   second line ``preview: <first N characters>...``.
4. All messages come back in their original order; the files as `{root-relative path: text}`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from reme_service.ops.working.paths import join, safe_stem
from reme_service.ops.working.token_count import TokenCounter
from reme_service.schema.messages import Message, Role

PLACEHOLDER = "tool call={name} result is stored in file path=`{path}`"
PREVIEW = "\npreview: {preview}..."


@dataclass(frozen=True)
class CompactSettings:
    max_total_tokens: int = 20000
    max_tool_message_tokens: int = 2000
    keep_recent_count: int = 10
    store_dir: str = ""
    preview_char_length: int = 0


@dataclass
class OffloadResult:
    """Messages after a step, the files it produced and whether it changed anything."""

    messages: list[Message]
    files: dict[str, str] = field(default_factory=dict)
    applied: bool = False
    #: the candidates were above `max_total_tokens` (the step had to act, whether or not it could)
    over_budget: bool = False


def candidate_indices(messages: Sequence[Message], keep_recent_count: int) -> list[int]:
    """Indices of the non-system messages, without the last `keep_recent_count` of them."""
    non_system = [i for i, m in enumerate(messages) if m.role is not Role.SYSTEM]
    return non_system[: max(0, len(non_system) - keep_recent_count)]


class FileNamer:
    """Hands out file paths for one request: a name is reused only for the same text; `is_free(path, text)`
    says whether the disk allows it (a missing file, or one that already holds that text)."""

    def __init__(self, is_free: Callable[[str, str], bool] | None = None) -> None:
        self._claimed: dict[str, str] = {}
        self._is_free = is_free or (lambda _path, _text: True)

    def claim(self, directory: str, stem: str, suffix: str, text: str) -> str:
        stem = safe_stem(stem) or uuid.uuid4().hex
        for number in range(1, 10_000):
            name = f"{stem}{suffix}" if number == 1 else f"{stem}_{number}{suffix}"
            path = join(directory, name)
            claimed = self._claimed.get(path)
            if claimed == text or (claimed is None and self._is_free(path, text)):
                self._claimed[path] = text
                return path
        return join(directory, f"{uuid.uuid4().hex}{suffix}")


def compact_messages(
    messages: Sequence[Message],
    settings: CompactSettings,
    counter: TokenCounter,
    namer: FileNamer | None = None,
) -> OffloadResult:
    """Offload large older tool outputs (see the module docstring)."""
    candidates = candidate_indices(messages, settings.keep_recent_count)
    result = OffloadResult(messages=list(messages))
    if not candidates or counter.count_messages([messages[i] for i in candidates]) <= settings.max_total_tokens:
        return result
    result.over_budget = True
    namer = namer or FileNamer()
    for index in candidates:
        message = messages[index]
        if message.role is not Role.TOOL or counter.count_message(message) <= settings.max_tool_message_tokens:
            continue
        text = message.text
        path = namer.claim(settings.store_dir, message.tool_call_id, ".txt", text)
        name = path.rsplit("/", 1)[-1].removesuffix(".txt")
        content = PLACEHOLDER.format(name=name, path=path)
        if settings.preview_char_length > 0:
            content += PREVIEW.format(preview=text[: settings.preview_char_length])
        result.messages[index] = message.model_copy(update={"content": content})
        result.files[path] = text
        result.applied = True
    return result
