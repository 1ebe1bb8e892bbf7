"""Workspace locks that hold across service processes: a lease record per workspace, kept in the shared store.

Several service processes (on one host or several) may serve one Chroma server. Read-modify-write flows
(`record_task_memory`'s counters, tool-call appends, deletes by frequency, library loads) run under
`store.lock(workspace)`; with a shared store that lock must exclude the other processes too, or two of them read
the same record and the second write drops the first one's change. Within a process the store's asyncio lock
still serialises callers first, so at most one request per process contends for a lease.

The protocol needs two things of a backend (`LeaseBackend`): a create-if-absent write that reports who holds the
record afterwards, and a delete (or an update) that applies only while the record still names a given holder.

* Acquire: claim the record `{owner: <random token>, expires: now + ttl}`; the lock is ours when the holder read
  back names our token. Otherwise wait (2 ms doubling to 50 ms, jittered) and claim again, for up to `wait`
  seconds, then give up with `StoreError` (503) naming the workspace. A record whose `expires` has passed is
  the lease of a holder that died: it is deleted, if it still names that holder, and the claim retried.
* Hold: a renewal task pushes `expires` forward every `ttl / 3`, so long sections (a library load embeds every
  memory under the lock) keep the lease, and a crashed process blocks the others for at most `ttl`.
* Release: delete the record if it still names us, unless another request of this process is waiting for the
  workspace: then the lease passes to it (at most `max_handoffs` times in a row). Both ends are shielded from
  cancellation: a request that is cancelled never leaves its lease behind (a claim completing after
  cancellation is released at once).

Guarantee: mutual exclusion while every holder's event loop keeps running (renewals) and the hosts' clocks agree
to within a few seconds; a holder stalled for `2/3 ttl` can lose its lease, which it logs as an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from reme_service.errors import StoreError

logger = logging.getLogger(__name__)

_FIRST_DELAY = 0.002
_MAX_DELAY = 0.05  # at most one waiter per process polls (the others queue on its asyncio lock)
_YIELD_WAIT = 1.5 * _MAX_DELAY  # longer than a poller's longest (jittered) sleep


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """Who holds a lease record: the owner's token, the expiry (Unix time), and whatever the backend needs to
    address exactly this version of the record (Elasticsearch: seq_no and primary term; Chroma: nothing)."""

    owner: str
    expires: float
    version: Any = None


class LeaseBackend(Protocol):
    """The few atomic operations a shared store offers for leases (see the module docstring)."""

    async def claim(self, key: str, owner: str, expires: float) -> LeaseHolder | None:
        """Create the record for `key` if there is none, then return its holder (None: no record any more)."""

    async def renew(self, key: str, holder: LeaseHolder, expires: float) -> LeaseHolder | None:
        """Move `holder`'s expiry to `expires`; None when the record no longer names `holder.owner`."""

    async def drop(self, key: str, holder: LeaseHolder) -> None:
        """Delete the record for `key` if it is still `holder`'s."""


@dataclass(slots=True)
class _Lease:
    """A lease this process holds: the record's holder (replaced by each renewal), the renewal task, and how many
    locked sections have used it since it was taken."""

    holder: LeaseHolder
    renewal: asyncio.Task[None] | None = None
    uses: int = 0
    lost: bool = False


class SharedLock:
    """Leases of one backend. `hold(key, local)` is what a store's `lock()` returns: the process's own asyncio
    lock of the workspace, then the lease.

    Handoff: when a section ends while other requests of this process wait for the same workspace, the lease is
    kept for the next one instead of being released and claimed again (three store round trips saved per
    section). After `max_handoffs` sections in a row it is released anyway, and the next local claim waits one
    backoff step first, so other processes get their turn."""

    def __init__(
        self,
        backend: LeaseBackend,
        *,
        ttl: float = 15.0,
        wait: float = 60.0,
        where: str = "",
        max_handoffs: int = 16,
    ) -> None:
        if ttl <= 0 or wait <= 0 or max_handoffs < 1:
            raise ValueError("lease ttl and wait must be positive, max_handoffs at least 1")
        self.backend = backend
        self.ttl = ttl
        self.wait = wait
        self.where = where
        self.max_handoffs = max_handoffs
        self._leases: dict[str, _Lease] = {}
        self._waiting: dict[str, int] = {}
        self._yielded: dict[str, float] = {}  # key -> when a lease was released to let other processes in
        self._cleanups: set[asyncio.Task[Any]] = set()

    @contextlib.asynccontextmanager
    async def hold(self, key: str, local: asyncio.Lock) -> AsyncIterator[None]:
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            await local.acquire()
        except BaseException:
            self._unwait(key)
            if not self._waiting.get(key) and not local.locked():
                self._end_in_background(key)  # a lease kept for this waiter would otherwise outlive everyone
            raise
        self._unwait(key)
        lease: _Lease | None = None
        try:
            lease = self._leases.get(key)
            if lease is None or lease.lost:
                lease = self._leases[key] = await self._take(key)
            lease.uses += 1
            yield
        finally:
            try:
                if lease is not None and (lease.lost or lease.uses >= self.max_handoffs or not self._waiting.get(key)):
                    if lease.uses >= self.max_handoffs and self._waiting.get(key):
                        self._yielded[key] = time.monotonic()
                    del self._leases[key]
                    release = asyncio.ensure_future(self._release(key, lease))
                    self._track(release)
                    await asyncio.shield(release)
            finally:
                local.release()

    def _unwait(self, key: str) -> None:
        left = self._waiting[key] - 1
        if left:
            self._waiting[key] = left
        else:
            del self._waiting[key]

    async def _take(self, key: str) -> _Lease:
        yielded = self._yielded.pop(key, None)
        if yielded is not None:  # we just let go after a long streak: give a polling process the first chance
            await asyncio.sleep(max(0.0, yielded + _YIELD_WAIT - time.monotonic()))
        lease = _Lease(await self._acquire(key))
        lease.renewal = asyncio.ensure_future(self._renew_forever(key, lease))
        return lease

    async def _release(self, key: str, lease: _Lease) -> None:
        """Stop renewing a lease (already removed from `_leases`) and release it."""
        if lease.renewal is not None:
            lease.renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await lease.renewal
        await self._drop_quietly(key, lease.holder)

    def _end_in_background(self, key: str) -> None:
        lease = self._leases.pop(key, None)  # at once: a request arriving meanwhile must take a lease of its own
        if lease is not None:
            self._track(asyncio.ensure_future(self._release(key, lease)))

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    async def _acquire(self, key: str) -> LeaseHolder:
        token = secrets.token_hex(12)
        deadline = time.monotonic() + self.wait
        delay = _FIRST_DELAY
        while True:
            now = time.time()
            claim = asyncio.ensure_future(self.backend.claim(key, token, now + self.ttl))
            try:
                holder = await asyncio.shield(claim)
            except asyncio.CancelledError:
                claim.add_done_callback(lambda done: self._drop_if_ours(key, token, done))
                raise
            if holder is not None and holder.owner == token:
                return holder
            if holder is not None and holder.expires < now:
                logger.warning(
                    "taking over the lock of workspace %r from a holder whose lease expired %.1f s ago (%s)",
                    key,
                    now - holder.expires,
                    self.where,
                )
                await self.backend.drop(key, holder)
                continue
            if holder is None:
                continue  # released between our claim and the read: claim again at once
            if time.monotonic() > deadline:
                raise StoreError(
                    f"workspace {key!r} stayed locked by another service process for {self.wait:g} s ({self.where})",
                    details={"workspace_id": key},
                )
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, _MAX_DELAY)

    async def _renew_forever(self, key: str, lease: _Lease) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                renewed = await self.backend.renew(key, lease.holder, time.time() + self.ttl)
            except Exception as exc:  # noqa: BLE001 - a failed renewal is retried; the lease lasts until it expires
                logger.warning("could not renew the lock of workspace %r (%s): %s", key, self.where, exc)
                continue
            if renewed is None:
                lease.lost = True
                logger.error(
                    "the lock of workspace %r was taken over while held (the process stalled past the lease); "
                    "writes of this section may have interleaved with another process's (%s)",
                    key,
                    self.where,
                )
                return
            lease.holder = renewed

    def _drop_if_ours(self, key: str, token: str, claim: asyncio.Future[LeaseHolder | None]) -> None:
        """After a cancelled acquire: release the lease if the claim went through after all."""
        if claim.cancelled() or claim.exception() is not None:
            return
        holder = claim.result()
        if holder is not None and holder.owner == token:
            self._track(asyncio.ensure_future(self._drop_quietly(key, holder)))

    async def _drop_quietly(self, key: str, holder: LeaseHolder) -> None:
        try:
            await self.backend.drop(key, holder)
        except Exception as exc:  # noqa: BLE001 - an unreleased lease expires by itself
            logger.warning(
                "could not release the lock of workspace %r (%s); it expires within %g s: %s",
                key,
                self.where,
                self.ttl,
                exc,
            )

    async def close(self) -> None:
        """Release every lease still held (none, unless a section is running) and wait for releases in flight."""
        for key in list(self._leases):
            await self._release(key, self._leases.pop(key))
        if self._cleanups:
            await asyncio.gather(*self._cleanups, return_exceptions=True)
