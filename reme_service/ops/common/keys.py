"""Context keys shared by every memory kind (each family keeps its own in its `keys.py`)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from reme_service.flow.context import Key
from reme_service.schema.memory import BaseMemory

QUERY: Key[str] = Key("query")
MEMORY_LIST: Key[list[BaseMemory]] = Key("memory_list")
DELETED_MEMORY_IDS: Key[list[str]] = Key("deleted_memory_ids")
# texts this request already embedded, by store name (the vectors come from that store's embedder), so a later
# write to the same store does not embed them again
EMBEDDED: Key[dict[str, dict[str, NDArray[np.float32]]]] = Key("embedded")
