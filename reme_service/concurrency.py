"""Run awaitables concurrently and fail like one call (`run_all`), and run blocking work that may hold a thread
for long on threads of its own (`ThreadLane`): the concurrency helpers of the service."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


async def run_all(coroutines: Iterable[Coroutine[Any, Any, T]], *, limit: int | None = None) -> list[T]:
    """Run the coroutines concurrently and return their results in order; with `limit`, at most that many run at
    once (the others wait their turn, in order).

    The first failure cancels the others and is raised as itself, not wrapped in an `ExceptionGroup`, so a caller
    (and the flow runner) reports it with its own type and status. Cancelling the caller cancels every coroutine.
    """
    pending = list(coroutines)
    if limit is not None and len(pending) > 1:
        gate = asyncio.Semaphore(max(1, limit))
        pending = [_gated(gate, coroutine) for coroutine in pending]
    if len(pending) == 1:
        return [await pending[0]]
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(coroutine) for coroutine in pending]
    except BaseExceptionGroup as failures:
        raise _first(failures) from None
    return [task.result() for task in tasks]


async def _gated(gate: asyncio.Semaphore, coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        async with gate:
            return await coroutine
    finally:
        coroutine.close()  # cancelled while waiting its turn: it never ran, so no "never awaited" warning


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


class ThreadLane:
    """A few worker threads of their own, for blocking work that may hold a thread for its whole time budget
    (a client's regex runs up to `grep_timeout`). In the default executor, a handful of such calls at once would
    take every thread, and every `asyncio.to_thread` of the service (file reads, embeddings) would queue behind
    them; in a lane they queue behind each other only. Calls run with the caller's context variables."""

    def __init__(self, name: str, threads: int) -> None:
        if threads < 1:
            raise ValueError("a thread lane needs at least one thread")
        self.name = name
        self.threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    async def start(self) -> None:
        """Nothing to do: the threads start with the first call."""

    async def close(self) -> None:
        """Drop the queued calls; a running one finishes within its own budget, off the event loop."""
        await asyncio.to_thread(self._pool.shutdown, wait=True, cancel_futures=True)
