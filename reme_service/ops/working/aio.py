"""A small asyncio helper of the working-memory ops."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


async def run_all(coroutines: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Run concurrently and return the results in order; the first failure cancels the rest and is raised as
    itself (not wrapped in an ExceptionGroup), so the runner reports it with its own status."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(c) for c in coroutines]
    except ExceptionGroup as failures:
        raise failures.exceptions[0] from None
    return [task.result() for task in tasks]
