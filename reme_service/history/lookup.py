"""`memory_history`: what the management API's `GET .../history` and the `vector_store` `history` action answer."""

from __future__ import annotations

from typing import Any

from reme_service.errors import NotFoundError
from reme_service.state.interfaces import HistoryStore
from reme_service.stores.base import VectorStore


async def memory_history(
    log: HistoryStore | None, store: VectorStore, workspace_id: str, memory_id: str
) -> list[dict[str, Any]]:
    """The memory's history, oldest first; 404 when it has none and does not exist (or history is off and it does
    not exist: a memory that exists has an empty history then)."""
    entries = await log.read(workspace_id, memory_id) if log is not None else []
    if not entries and not (await store.exists_workspace(workspace_id) and await store.get(workspace_id, [memory_id])):
        raise NotFoundError("no such memory", details={"memory_id": memory_id})
    return entries
