"""Run awaitables concurrently and fail like one call (`run_all`), run blocking work that may hold a thread for long
on threads of its own (`ThreadLane`), run CPU work on many items off the event loop (`off_loop_if`, `OFF_LOOP_ITEMS`,
`holds_many`), and run background work at most once at a time per key (`OnePerKey`): the concurrency helpers of the
service."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Coroutine, Hashable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, ParamSpec, TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
P = ParamSpec("P")

#: Above this many items (memories, nodes, messages, dicts), converting, dumping or encoding them runs in a worker
#: thread (`off_loop_if`): 1,000 memories are about 10 ms of CPU, a thread hop costs ~0.1 ms, so less stays inline.
OFF_LOOP_ITEMS = 1000


async def off_loop_if(large: bool, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)`: in a worker thread (`asyncio.to_thread`, with the caller's context variables) when
    `large`, else right here, on the event loop (small work costs less than the hop)."""
    if large:
        return await asyncio.to_thread(fn, *args, **kwargs)
    return fn(*args, **kwargs)


def holds_many(*values: object, depth: int = 3) -> bool:
    """Whether `values` hold more than `OFF_LOOP_ITEMS` items: the lengths of the lists, tuples and dicts among them,
    and inside dicts up to `depth` levels (lists are counted, never entered, so this costs microseconds). It
    predicts what dumping or encoding a flow's answer costs: its bulk is lists, as `answer` (messages) or in
    `metadata` (`memory_list`, `action_result`, `action_result.memory_ids`)."""
    return sum(_items(value, depth, OFF_LOOP_ITEMS) for value in values) > OFF_LOOP_ITEMS


def _items(value: object, depth: int, budget: int) -> int:
    if isinstance(value, list | tuple):
        return len(value)
    if not isinstance(value, dict):
        return 0
    total = len(value)
    if depth > 1:
        for item in value.values():
            if total > budget:
                break
            total += _items(item, depth - 1, budget - total)
    return total


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

    async def call(self, inline: bool, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` right here when `inline` (work too small to pay for a thread hop), else `run`."""
        if inline:
            return fn(*args, **kwargs)
        return await self.run(fn, *args, **kwargs)

    async def start(self) -> None:
        """Nothing to do: the threads start with the first call."""

    async def close(self) -> None:
        """Drop the queued calls; a running one finishes within its own budget, off the event loop."""
        await asyncio.to_thread(self._pool.shutdown, wait=True, cancel_futures=True)


class OnePerKey(Generic[K]):
    """Background tasks, at most one running per key (a table's index build, its analysis): `start` does nothing
    while the key's task runs; `wait` lasts until every task has ended (tests, benchmarks), `close` cancels them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: dict[K, asyncio.Task[None]] = {}

    def running(self, key: K) -> bool:
        task = self._tasks.get(key)
        return task is not None and not task.done()

    def start(self, key: K, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `work()` in the background unless `key`'s task is running (then `work` is not called)."""
        if self.running(key):
            return
        task = asyncio.create_task(work(), name=f"{self.name}-{key}")
        self._tasks[key] = task
        task.add_done_callback(lambda done: self._forget(key, done))

    def _forget(self, key: K, task: asyncio.Task[None]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]

    async def wait(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
