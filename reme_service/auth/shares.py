"""Per-key fair shares: what one API key may hold at once, so that one key at its bound is refused (429) while
every other key keeps its own share of the service.

`KeyShares` counts, per process and per key, the holdings of each `ShareKind` — requests under way (uploads
included), long polls, MCP streams, event streams — against `auth.per_key`; `acquire` takes one or raises
`RateLimitedError` with a `retry_after`. `FairLane` is the regex thread lane with the same rule: a key runs at most
`per_key.regex` calls on the lane's threads at once, its next `per_key.regex_waiting` calls wait their turn (in the
key's own queue: another key's calls go straight to a free thread), and past that a call is refused.

The key of a holding is the caller's key id (`Caller.key_id`); every keyless caller — loopback in open mode,
stdio MCP, the Python API — is the one client `KEYLESS`. Queued jobs are bounded by counting the job queue
(`server/job_routes.py`), not here. The counts are this process's own: with `http.workers` > 1 each worker
grants each key its shares (a key may hold `workers` times as much in all, still bounded).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from typing import Literal, ParamSpec, TypeVar

from reme_service.auth.caller import caller_now
from reme_service.concurrency import ThreadLane
from reme_service.config.models import PerKeyConfig
from reme_service.errors import RateLimitedError

P = ParamSpec("P")
T = TypeVar("T")

ShareKind = Literal["requests", "long_polls", "streams", "events"]

KEYLESS = ""  # the key of every keyless caller together

_NAMES: dict[ShareKind, str] = {
    "requests": "requests under way",
    "long_polls": "long polls (GET /jobs/{id}?wait=)",
    "streams": "MCP streams",
    "events": "event streams",
}


def key_of_caller() -> str:
    """The share key of the request being served (`KEYLESS` for a keyless one)."""
    return caller_now().key_id or KEYLESS


def share_refused(what: str, limit: int, setting: str, retry_after: int) -> RateLimitedError:
    """The 429 of a key at its bound (`details` name the share, its bound and the Retry-After seconds)."""
    return RateLimitedError(
        f"this API key already holds {limit} {what} ({setting}); retry when one ends",
        retry_after=retry_after,
        details={"share": setting, "limit": limit, "retry_after": retry_after},
    )


class KeyShares:
    """The holdings of each key, by kind. Not thread-safe: used from the event loop only."""

    def __init__(self, limits: PerKeyConfig, *, retry_after: int = 1) -> None:
        self.limits = limits
        self.retry_after = max(1, retry_after)
        self._held: dict[tuple[ShareKind, str], int] = {}

    def limit(self, kind: ShareKind) -> int:
        return int(getattr(self.limits, kind))

    def held(self, kind: ShareKind, key: str) -> int:
        return self._held.get((kind, key), 0)

    def acquire(self, kind: ShareKind, key: str) -> Callable[[], None]:
        """Take one `kind` share of `key` and return its release (idempotent), or raise `RateLimitedError` (429)
        when `key` holds its bound already."""
        slot = (kind, key)
        held = self._held.get(slot, 0)
        limit = self.limit(kind)
        if held >= limit:
            raise share_refused(_NAMES[kind], limit, f"auth.per_key.{kind}", self.retry_after)
        self._held[slot] = held + 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            left = self._held.get(slot, 1) - 1
            if left > 0:
                self._held[slot] = left
            else:
                self._held.pop(slot, None)

        return release


class FairLane(ThreadLane):
    """A `ThreadLane` shared fairly between keys (see the module doc): the key is read from the calling request
    (`key_of_caller`), so ops need not know about keys."""

    def __init__(self, name: str, threads: int, limits: PerKeyConfig, *, retry_after: int = 1) -> None:
        super().__init__(name, threads)
        self.per_key = limits.regex
        self.waiting_per_key = limits.regex_waiting
        self.retry_after = max(1, retry_after)
        self._gates: dict[str, asyncio.Semaphore] = {}
        self._users: dict[str, int] = {}  # calls of each key running or waiting

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` on a lane thread within the calling key's share. The share is held until the
        thread is done with the call, even when the awaiting request is cancelled first (its regex runs on)."""
        key = key_of_caller()
        users = self._users.get(key, 0)
        if users >= self.per_key + self.waiting_per_key:
            what = f"regex calls running and {self.waiting_per_key} waiting"
            raise share_refused(what, self.per_key, "auth.per_key.regex", self.retry_after)
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = asyncio.Semaphore(self.per_key)
        self._users[key] = users + 1
        try:
            await gate.acquire()
        except BaseException:
            self._leave(key)
            raise
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        try:
            future = self._pool.submit(call)
        except BaseException:
            gate.release()
            self._leave(key)
            raise

        def done(_: object) -> None:
            try:
                loop.call_soon_threadsafe(self._finished, key, gate)
            except RuntimeError:  # the loop is closed (the service stopped): nothing left to count
                pass

        future.add_done_callback(done)
        return await asyncio.wrap_future(future)

    def _finished(self, key: str, gate: asyncio.Semaphore) -> None:
        gate.release()
        self._leave(key)

    def _leave(self, key: str) -> None:
        self._users[key] -= 1
        if self._users[key] == 0:  # an idle key is forgotten
            del self._users[key], self._gates[key]
