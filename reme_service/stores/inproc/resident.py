"""`ResidentSet`: which workspaces a persistent in-process store holds in RAM, least recently used first, with each
one's estimated size, so that the store can let idle ones go when the total passes its budget.

The estimate (`footprint`) is the vector matrix's bytes (and its approximate index's, its int8 copy's and its BM25
index's, if any) plus the node count times the measured size of a sample of nodes (their ids and blobs in the
`NodeTable`, and their place in the id index): exact for the matrix, close for the rest, and cheap — recomputed only
when a workspace's size changes, or one of those indexes comes or goes, or its BM25 index keeps more or fewer terms'
scores.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Generic, TypeVar

from reme_service.stores.inproc.workspace import WorkspaceState

SAMPLE_NODES = 64
INDEX_ENTRY_BYTES = 104  # a `rows` dict entry (key pointer, value int, hash slot) and the table's two list slots
K = TypeVar("K", bound=str)  # how the holder names a workspace (the local store: a `WorkspaceId`)


def footprint(state: WorkspaceState) -> int:
    """Estimated bytes `state` holds (module docstring)."""
    size = state.size
    lexical = state.lexical.nbytes() if state.lexical is not None else 0
    if not size:
        return int(state.matrix.nbytes) + lexical
    per_node = state.nodes.bytes_per_row(SAMPLE_NODES)
    ann = state.ann.memory_bytes() if state.ann is not None else 0
    quantized = state.quantized.nbytes() if state.quantized is not None else 0
    return int(state.matrix.nbytes + size * (per_node + INDEX_ENTRY_BYTES) + ann + quantized + lexical)


def _shape(state: WorkspaceState) -> tuple[int, ...]:
    """What changes `footprint` enough to estimate it again: the row count, whether the approximate index and the
    int8 copy exist, and the BM25 index's kept terms (-1 without one)."""
    lexical = state.lexical
    kept = lexical.kept_terms if lexical is not None else -1
    return (state.size, state.ann is not None, state.quantized is not None, kept)


class ResidentSet(Generic[K]):
    """Estimated bytes per resident workspace, least recently used first; `total` is their sum."""

    def __init__(self, budget_bytes: int | None) -> None:
        self.budget_bytes = budget_bytes
        self.total = 0
        # id -> (state id, `_shape` of the state, bytes)
        self._sizes: OrderedDict[K, tuple[int, tuple[int, ...], int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sizes)

    def touch(self, workspace_id: K, state: WorkspaceState) -> None:
        """`workspace_id` was just used; its size is re-estimated when its state or its `_shape` changed."""
        known = self._sizes.get(workspace_id)
        shape = _shape(state)
        if known is not None and known[0] == id(state) and known[1] == shape:
            self._sizes.move_to_end(workspace_id)
            return
        nbytes = footprint(state)
        self.total += nbytes - (known[2] if known is not None else 0)
        self._sizes[workspace_id] = (id(state), shape, nbytes)
        self._sizes.move_to_end(workspace_id)

    def forget(self, workspace_id: K) -> None:
        known = self._sizes.pop(workspace_id, None)
        if known is not None:
            self.total -= known[2]

    def over_budget(self) -> bool:
        return self.budget_bytes is not None and self.total > self.budget_bytes

    def oldest_first(self) -> Iterator[K]:
        return iter(list(self._sizes))
