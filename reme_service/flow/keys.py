"""Every context key ops pass to each other, in one place."""

from __future__ import annotations

from reme_service.flow.context import Key
from reme_service.schema.memory import BaseMemory

QUERY: Key[str] = Key("query")
MEMORY_LIST: Key[list[BaseMemory]] = Key("memory_list")
DELETED_MEMORY_IDS: Key[list[str]] = Key("deleted_memory_ids")
