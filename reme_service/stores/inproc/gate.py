"""The readers-writer gate of one in-process workspace (`WorkspaceState.gate`).

Reads and writes share a workspace's arrays. Work over few rows runs inline on the event loop, larger work in a
worker thread (the caller decides, see `stores/inproc/workspace.py`); either way a mutation waits until no reader is
in flight and holds new readers off while it runs. One writer at a time is the caller's business: writers hold the
workspace's write lock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from reme_service.stores.base import consume_exception

T = TypeVar("T")


class Gate:
    """Readers share a workspace's arrays; a mutation waits for running readers and holds new ones off."""

    __slots__ = ("_readers", "_writing", "_changed")

    def __init__(self) -> None:
        self._readers = 0
        self._writing = False
        self._changed: asyncio.Event | None = None

    async def _wait(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        await self._changed.wait()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _release_shared(self) -> None:
        self._readers -= 1
        if not self._readers:
            self._notify()

    def _release_exclusive(self) -> None:
        self._writing = False
        self._notify()

    async def run_shared(self, fn: Callable[[], T], *, inline: bool) -> T:
        while self._writing:
            await self._wait()
        self._readers += 1
        return await self._run(fn, inline, self._release_shared)

    async def run_exclusive(self, fn: Callable[[], T], *, inline: bool) -> T:
        """Run a mutation alone. Callers hold the workspace's write lock, so there is one writer at a time."""
        self._writing = True
        try:
            while self._readers:
                await self._wait()
        except BaseException:
            self._release_exclusive()
            raise
        return await self._run(fn, inline, self._release_exclusive)

    @staticmethod
    async def _run(fn: Callable[[], T], inline: bool, release: Callable[[], None]) -> T:
        if inline:
            try:
                return fn()
            finally:
                release()
        # The gate is released when the thread ends, not when an awaiting caller is cancelled.
        future = asyncio.ensure_future(asyncio.to_thread(fn))

        def finished(done: asyncio.Future[T]) -> None:
            release()
            consume_exception(done)

        future.add_done_callback(finished)
        return await asyncio.shield(future)
