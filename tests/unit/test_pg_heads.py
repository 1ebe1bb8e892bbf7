"""`stores/pg/heads.py`: the registry rows searches of the pgvector copies read, several in one statement. A search
joins only a read that has not begun (so it sees every write finished before it asked), one caller's cancellation
leaves the others' read alone, and a failed read fails its callers only."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

import pytest

from reme_service.stores.pg.heads import HeadReads
from tests.conditions import until

T = TypeVar("T")

pytestmark = pytest.mark.anyio
LIMIT = 5.0  # seconds a caller may wait before the test fails (a lost caller would wait forever)


async def answer(waiting: Awaitable[T]) -> T:
    return await asyncio.wait_for(waiting, LIMIT)


class Registry:
    """A fake registry read: each call is one "statement", numbered; a call can be held open until released."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.hold = asyncio.Event()  # statements wait for it once they have looked
        self.fail: Exception | None = None
        self.heads = HeadReads(self.read)

    async def read(self, ids: list[str]) -> dict[str, tuple[str, int]]:
        self.calls.append(sorted(ids))
        number = len(self.calls)  # what this statement saw: later statements see later writes
        await self.hold.wait()
        if self.fail is not None:
            raise self.fail
        return {i: (i, number) for i in ids if not i.startswith("missing")}

    async def ask(self, *workspace_ids: str) -> list[asyncio.Task[tuple[str, int] | None]]:
        """Callers for `workspace_ids`, each started up to its wait."""
        tasks = [asyncio.create_task(self.heads.get(i)) for i in workspace_ids]
        await asyncio.sleep(0)  # (one turn of the loop: each has asked)
        return tasks

    async def looking(self, *workspace_ids: str) -> list[asyncio.Task[tuple[str, int] | None]]:
        """Callers for `workspace_ids` whose statement has looked and is held."""
        count = len(self.calls)
        tasks = await self.ask(*workspace_ids)
        await until(lambda: len(self.calls) == count + 1)
        return tasks


async def test_callers_that_ask_while_a_read_runs_share_the_next_one() -> None:
    registry = Registry()
    [first] = await registry.looking("a")
    later = await registry.ask("b", "c", "b", "missing", "a")
    registry.hold.set()
    assert await answer(first) == ("a", 1)
    # the five that asked during the first read: one statement for the four ids, each caller its own row
    assert await answer(asyncio.gather(*later)) == [("b", 2), ("c", 2), ("b", 2), None, ("a", 2)]
    assert registry.calls == [["a"], ["a", "b", "c", "missing"]]
    await registry.heads.close()


async def test_a_caller_never_joins_a_read_already_under_way() -> None:
    """The read under way may have looked before a write the caller must see: the caller waits for the next."""
    registry = Registry()
    [before] = await registry.looking("a")  # statement 1 has looked
    [after] = await registry.ask("a")  # (a write finished before this caller asked)
    registry.hold.set()
    assert await answer(before) == ("a", 1)
    assert await answer(after) == ("a", 2)
    await registry.heads.close()


async def test_a_cancelled_caller_leaves_the_others_read_alone() -> None:
    registry = Registry()
    gone, stays = await registry.looking("a", "a")
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    registry.hold.set()
    assert await answer(stays) == ("a", 1)
    assert gone.cancelled()
    await registry.heads.close()


async def test_a_failed_read_fails_its_callers_and_the_next_read_runs() -> None:
    registry = Registry()
    registry.fail = RuntimeError("the database went away")
    waiting = await registry.looking("a", "b")
    registry.hold.set()
    for task in waiting:
        with pytest.raises(RuntimeError, match="went away"):
            await answer(task)
    registry.fail = None
    assert await answer(registry.heads.get("a")) == ("a", 2)
    await registry.heads.close()


async def test_close_cancels_the_callers_still_waiting() -> None:
    registry = Registry()
    [running] = await registry.looking("a")
    [queued] = await registry.ask("b")
    await registry.heads.close()
    for task in (running, queued):
        with pytest.raises(asyncio.CancelledError):
            await answer(task)
