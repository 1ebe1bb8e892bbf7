"""Run awaitables concurrently and fail like one call: the single concurrency helper of the service."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


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
