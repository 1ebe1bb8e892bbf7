"""How personal memories are shaped: the statements taken from messages, observations and insights, their
stable ids, their times, and the store filters that keep users and memory kinds apart.

Stored layout (inside `PersonalMemory.metadata`, the "inner" metadata):

* `memory_type`: `observation` or `insight` — the kind retrieval weighs (`FuseRerankOp`'s ratios);
* observations: `observation_type` (`personal_info`, or `personal_info_with_time` when the message speaks of a
  time), `keywords`, `source_message`, `source_metadata` (the message's own metadata, e.g. a dialogue id),
  `msg_time` and `msg_date` (when it was said), `info_score`, `reflected` (consumed by a reflection yet);
* a time the observation refers to: `time_info` (as written), `event_start` / `event_end` (`YYYY-MM-DD HH:MM:SS`,
  the span is `[start, end)`);
* insights: `insight_type: insight`, the subject in `PersonalMemory.reflection_subject`.

`time_created` of an observation is the time its message was said, not the time it was stored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from reme_service.ops.common.context import ServiceContext
from reme_service.ops.personal import fields
from reme_service.retrieval.timespan import TIME_FORMAT, TimeSpan
from reme_service.schema.memory import PersonalMemory, now_str

T = TypeVar("T")

OBSERVATION = "observation"
INSIGHT = "insight"
OBS_PLAIN = "personal_info"
OBS_WITH_TIME = "personal_info_with_time"
RULES_AUTHOR = "rules"


@dataclass
class Statement:
    """A user message kept by the info filter, with the time it was said (`time_given`: from the request)."""

    text: str
    time: datetime
    time_given: bool
    score: int
    metadata: dict[str, Any] = field(default_factory=dict)


def language(ctx: ServiceContext) -> str:
    """The prompt language: the request's `language` (`en`, `zh`) or the service's. Reads `fields.LANGUAGE`."""
    requested = ctx.input(fields.LANGUAGE)
    if requested:
        return "zh" if requested == "zh" else ""
    return "zh" if ctx.language == "zh" else ""


def user_name(ctx: ServiceContext) -> str:
    """Whose memories these are: the request's `user_name`, `user` when blank. Reads `fields.USER_NAME`."""
    return ctx.input(fields.USER_NAME).strip() or "user"


def personal_filter(target: str | None, *, kind: str | None = None, **inner: Any) -> dict[str, Any]:
    """A store filter for personal memories, of one user when `target` is given, of one kind when `kind` is."""
    flt: dict[str, Any] = {"metadata.memory_type": "personal"}
    if target is not None:
        flt["metadata.target"] = target
    if kind is not None:
        flt["metadata.metadata.memory_type"] = kind
    for key, value in inner.items():
        flt[f"metadata.metadata.{key}"] = value
    return flt


def event_filter(span: TimeSpan, base: dict[str, Any]) -> dict[str, Any]:
    """`base` (a store filter) narrowed to the memories whose event period (`event_start`..`event_end`) overlaps
    `span`; memories that record no event period match nothing."""
    start, end = span.bounds()
    return {**base, "metadata.metadata.event_start": {"lt": end}, "metadata.metadata.event_end": {"gt": start}}


def stable_id(*parts: object) -> str:
    """A 32-hex id derived from `parts`, so re-sending the same message replaces its observations."""
    return hashlib.md5("\x1f".join(str(p) for p in parts).encode(), usedforsecurity=False).hexdigest()


def new_observation(
    statement: Statement,
    *,
    content: str,
    keywords: list[str],
    target: str,
    author: str,
    ordinal: int,
    span: TimeSpan | None = None,
    time_info: str = "",
) -> PersonalMemory:
    """An observation about `target` drawn from `statement` (`ordinal`: its number among the statement's)."""
    said = statement.time.strftime(TIME_FORMAT)
    inner: dict[str, Any] = {
        "memory_type": OBSERVATION,
        "observation_type": OBS_WITH_TIME if span is not None or time_info else OBS_PLAIN,
        "keywords": keywords,
        "source_message": statement.text,
        "source_metadata": {k: v for k, v in statement.metadata.items() if k != "memorized"},
        "msg_time": said,
        "msg_date": said[:10],
        "info_score": statement.score,
        "reflected": False,
    }
    if time_info:
        inner["time_info"] = time_info
    if span is not None:
        inner["event_start"], inner["event_end"] = span.bounds()
        inner["time_info"] = time_info or f"{span.text} ({span.label})"
    return PersonalMemory(
        memory_id=stable_id(target, said, statement.text, ordinal),
        when_to_use=content,
        content=content,
        target=target,
        author=author,
        time_created=said,
        time_modified=now_str(),
        valid_from=said,
        metadata=inner,
    )


def _moment(text: str) -> datetime | None:
    """A stored `YYYY-MM-DD HH:MM:SS` time (`fromisoformat`: many times faster than `strptime`)."""
    if len(text) != len("2023-05-08 13:56:00"):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def kind(memory: PersonalMemory) -> str:
    return str(memory.metadata.get("memory_type", ""))


def said_at(memory: PersonalMemory) -> datetime | None:
    """When the memory's source was said (`time_created`), or None when it is not a valid time."""
    return _moment(memory.time_created)


def event_span(memory: PersonalMemory) -> TimeSpan | None:
    """The period the memory refers to, when it records one."""
    start, end = memory.metadata.get("event_start"), memory.metadata.get("event_end")
    if not isinstance(start, str) or not isinstance(end, str):
        return None
    first, last = _moment(start), _moment(end)
    return TimeSpan(first, last) if first is not None and last is not None else None


def newest_first(memories: Iterable[PersonalMemory]) -> list[PersonalMemory]:
    """Sorted by `time_created`, newest first; a stable sort, so equal times keep their order."""
    return sorted(memories, key=lambda m: m.time_created, reverse=True)


def batches(items: list[T], size: int) -> list[list[T]]:
    size = max(1, size)
    return [items[i : i + size] for i in range(0, len(items), size)]
