"""Waiting on conditions, never on guessed durations: the one polling helper of the tests."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable


async def until(condition: Callable[[], bool | Awaitable[bool]], *, limit: float = 30.0) -> None:
    """Poll `condition` (plain or async) until it holds; fail the test after `limit` seconds."""
    deadline = time.monotonic() + limit
    while True:
        held = condition()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        assert time.monotonic() < deadline, f"condition still false after {limit:g} s"
        await asyncio.sleep(0.005)  # the polling interval, not a guess at how long anything takes


def until_sync(condition: Callable[[], bool], *, limit: float = 30.0) -> None:
    """`until` for synchronous tests (a server in another thread or process)."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"condition still false after {limit:g} s"
        time.sleep(0.02)  # the polling interval
