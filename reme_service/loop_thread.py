"""An asyncio event loop of its own thread, for synchronous callers of async code (`with ReMeApp(...)`).

`run(coro)` runs a coroutine on that loop and waits for its result, so every call shares one loop and what lives
on it (the app's clients, locks and background tasks). `close()` stops the loop and joins the thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running in a daemon thread until `close()`."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop and return its result (its exception is raised here)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        """Let the loop's worker threads finish, stop the loop, join its thread and close it."""
        try:
            self.run(self._loop.shutdown_default_executor())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
