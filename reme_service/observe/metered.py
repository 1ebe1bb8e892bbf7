"""Client calls counted and timed: `measured` runs one call and records it into a `metrics.Meter`.

The wrappers put around the clients call it: `GuardedStore` (`storage/guarded.py`) for every store operation, and
`MeteredLLM` / `MeteredEmbedder` (`providers/metered.py`) for `chat` and `embed`. A call a client makes of itself
inside one of those (a store's `search` calling its own `search_vector`) happens behind the wrapper, so it is
counted once, as the outer call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TypeVar

from reme_service.observe.metrics import Meter

T = TypeVar("T")


async def measured(meter: Meter | None, operation: str, call: Awaitable[T]) -> T:
    """Await `call`, recording its duration and outcome (`ok`, `error`, `cancelled`) as `operation` in `meter`
    (`None`: not measured)."""
    if meter is None:
        return await call
    started = time.perf_counter()
    outcome = "error"
    try:
        result = await call
        outcome = "ok"
        return result
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    finally:
        meter.observe(operation, outcome, time.perf_counter() - started)
