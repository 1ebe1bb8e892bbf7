"""Time validity of personal memories: when a fact holds, when it expires, and how retrieval weighs its age.

* `valid_from` is when the fact was said (an observation's message time); `valid_to` is set when a newer statement
  contradicts it (ContraRepeatOp, LongContraRepeatOp): the memory stays, marked no longer true (an INVALIDATE in its
  history and in the change events). Both empty on memories stored before time validity existed: valid always.
* `recorded_at` is when it was stored; `expires_at` = `recorded_at` + the TTL (the request's `ttl`, else the
  workspace's `lifecycle.ttl_seconds`; none by default).
* Retrieval with `as_of` keeps a memory when `valid_from <= as_of < valid_to` and `as_of < expires_at` (each bound
  only when set); without it, the facts valid now: no `valid_to` and not expired (`valid_from` is not checked, so a
  client that never sends `as_of` sees what it saw before, less the invalidated facts). `include_invalid` keeps all.
* Decay (`lifecycle.decay_half_life_days`, off by default): a multiplier `max(floor, 0.5 ** (age / half_life))` on
  the fused score, age counted from `valid_from` (else `time_created`) to `as_of`; it ranks, it never filters.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from reme_service.config.models import LifecycleSettings
from reme_service.retrieval.timespan import TIME_FORMAT
from reme_service.schema.memory import BaseMemory, PersonalMemory, now_str

SECONDS_PER_DAY = 86_400.0


def _moment(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def stamp_recorded(memories: Iterable[PersonalMemory], ttl_seconds: float | None) -> None:
    """Set `recorded_at` (now) on memories being stored, and `expires_at` when a TTL applies."""
    now = datetime.now().replace(microsecond=0)
    recorded = now.strftime(TIME_FORMAT)
    expires = (now + timedelta(seconds=ttl_seconds)).strftime(TIME_FORMAT) if ttl_seconds else ""
    for memory in memories:
        memory.recorded_at = recorded
        if expires:
            memory.expires_at = expires


def invalidated(memory: PersonalMemory, at: str) -> PersonalMemory:
    """The memory marked no longer true from `at` (a newer contradicting statement's time; now when empty)."""
    return memory.model_copy(update={"valid_to": at or now_str(), "time_modified": now_str()})


@dataclass(frozen=True)
class Validity:
    """Which memories retrieval keeps: those valid at `as_of`, or (None) those valid now."""

    as_of: datetime | None = None

    def keeps(self, memory: BaseMemory) -> bool:
        if not isinstance(memory, PersonalMemory):
            return True
        expires = _moment(memory.expires_at)
        if self.as_of is None:
            return not memory.valid_to and (expires is None or datetime.now() < expires)
        start, end = _moment(memory.valid_from), _moment(memory.valid_to)
        if start is not None and self.as_of < start:
            return False
        if end is not None and self.as_of >= end:
            return False
        return expires is None or self.as_of < expires


def decay(memory: BaseMemory, as_of: datetime, settings: LifecycleSettings) -> float:
    """The age multiplier in [floor, 1]; 1 when decay is off or the memory's age is unknown."""
    half_life = settings.decay_half_life_days
    if half_life is None or not isinstance(memory, PersonalMemory):
        return 1.0
    born = _moment(memory.valid_from) or _moment(memory.time_created)
    if born is None:
        return 1.0
    age_days = max(0.0, (as_of - born).total_seconds() / SECONDS_PER_DAY)
    factor: float = 0.5 ** (age_days / half_life)
    return max(settings.decay_floor, factor)
