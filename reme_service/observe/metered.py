"""Client calls counted and timed: LLM `chat`, embedding `embed` and the vector stores' operations.

The base classes call `meter_methods` from `__init_subclass__`, so every backend, present or future, is measured
without doing anything (as `stores/audited.py` audits every backend's writes). Each wrapper records into the
instance's `meter` (`metrics.Meter`, given by the app when it starts; `None` = not measured). A call that another
call of the same client makes (a store's `search` calling its own `search_vector`) is counted once, as the outer.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from reme_service.observe.metrics import Meter

LLM_CALLS = ("chat",)
EMBEDDING_CALLS = ("embed",)
STORE_OPERATIONS = (
    "upsert",
    "delete_ids",
    "get",
    "search_vector",
    "search",
    "search_hybrid",
    "list_nodes",
    "summarize",
    "replace_workspace",
    "delete_workspace",
    "copy_workspace",
    "list_workspaces",
)

_active: ContextVar[Meter | None] = ContextVar("_active_meter", default=None)

Method = Callable[..., Awaitable[Any]]


def _metered(operation: str, method: Method) -> Method:
    @functools.wraps(method)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        meter: Meter | None = getattr(self, "meter", None)
        if meter is None or _active.get() is meter:
            return await method(self, *args, **kwargs)
        token = _active.set(meter)
        started = time.perf_counter()
        outcome = "error"
        try:
            result = await method(self, *args, **kwargs)
            outcome = "ok"
            return result
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            _active.reset(token)
            meter.observe(operation, outcome, time.perf_counter() - started)

    wrapper.__metered__ = True  # type: ignore[attr-defined]
    return wrapper


def meter_methods(cls: type, names: tuple[str, ...]) -> None:
    """Wrap the methods of `names` that `cls` itself defines (inherited ones are wrapped where they are defined)."""
    for name in names:
        method = cls.__dict__.get(name)
        if method is None or getattr(method, "__isabstractmethod__", False) or getattr(method, "__metered__", False):
            continue
        setattr(cls, name, _metered(name, method))
