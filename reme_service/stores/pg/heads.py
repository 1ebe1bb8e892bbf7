"""`HeadReads`: the registry rows that searches of the pgvector store's copies read, several in one statement.

Every search of a copy (`pg/replica.py`) first reads its workspace's registry row, to learn whether the copy is
current. Under load, many searches want a row at once; each used to take a pooled connection and make its own round
trip. Here a search asks for its row and joins the next read that has not started yet; reads run one after another,
each for every workspace asked for since the last one began (`WHERE workspace_id = ANY(...)`).

A search never joins a read already under way: that read's snapshot may predate a write that finished before the
search asked, and the search must see such a write (read-your-writes, also across workers). A read that fails fails
each search waiting for it; a search cancelled while it waits leaves the read, and the others, alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class HeadReads(Generic[T]):
    """Reads `read(ids) -> {id: row}` for waiting callers in batches (module docstring). A missing id gives None."""

    def __init__(self, read: Callable[[list[str]], Awaitable[dict[str, T]]]) -> None:
        self._read = read
        self._next: dict[str, asyncio.Future[T | None]] = {}  # the read to come: id -> its callers' future
        self._reader: asyncio.Task[None] | None = None

    async def get(self, workspace_id: str) -> T | None:
        """The row of `workspace_id` as a read begun after this call finds it."""
        future = self._next.get(workspace_id)
        if future is None:
            future = self._next[workspace_id] = asyncio.get_running_loop().create_future()
            if self._reader is None:
                self._reader = asyncio.create_task(self._drain())
        return await asyncio.shield(future)  # a caller cancelled does not cancel the others' read

    async def _drain(self) -> None:
        try:
            while self._next:
                batch, self._next = self._next, {}
                try:
                    rows = await self._read(list(batch))
                except Exception as exc:
                    for future in batch.values():
                        if not future.done():
                            future.set_exception(exc)
                            future.exception()  # (marked retrieved: its callers may all have gone)
                    continue
                except BaseException:  # cancelled (`close`): so are its callers
                    for future in batch.values():
                        future.cancel()
                    raise
                for workspace_id, future in batch.items():
                    if not future.done():
                        future.set_result(rows.get(workspace_id))
        finally:
            if self._reader is asyncio.current_task():
                self._reader = None

    async def close(self) -> None:
        """Stop reading; callers still waiting get `CancelledError`."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        for future in self._next.values():
            future.cancel()
        self._next = {}
