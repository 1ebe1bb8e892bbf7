"""The pgvector store's per-process copy of workspace registry rows, so a search needs no registry read.

A registry row (`<prefix>workspaces`: the workspace's table, the dimension of its vectors, their embedding space)
is kept here only once it names a table that holds vectors (`dim` set) of this store's own embedding space (so a
kept row always passes the space check of a search).
Such a row changes only together with its table: `replace_workspace` points it at a new table, emptying a
workspace or deleting it drops the table, and the dimension and the space are fixed for a table's life (a write in
another space or dimension is refused; only a row with no recorded space adopts one in place, and such rows are
never kept). Every change of a kept row therefore drops the table it names, in the same transaction — table names
carry a generation and are never reused — so a reader holding a stale copy finds out from the statement it runs
(`UndefinedTable`), forgets the copy and reads the row again. Writers never use the copies: they lock the row
(`FOR UPDATE`) in their transaction.

A workspace not kept here (unknown, empty, or of another space) is read from the registry each time: an absence
is never remembered, since another process may create the workspace at any moment.
"""

from __future__ import annotations

from typing import NamedTuple

from reme_service.stores.spaces import EmbeddingSpace, recorded_space

MAX_ENTRIES = 4_096  # past it the copies start over


class Entry(NamedTuple):
    """A workspace's registry row."""

    tbl: str
    dim: int | None
    space: EmbeddingSpace | None


class RegistryCache:
    """Registry rows this process may use without reading them again (module docstring)."""

    def __init__(self, space: EmbeddingSpace) -> None:
        self._space = space
        self._entries: dict[str, Entry] = {}

    def get(self, workspace_id: str) -> Entry | None:
        return self._entries.get(workspace_id)

    def remember(self, workspace_id: str, entry: Entry) -> None:
        """Keep `entry` if it can change only with its table (module docstring)."""
        if entry.dim is None or recorded_space(entry.space, entry.dim) != self._space:
            return
        if len(self._entries) >= MAX_ENTRIES and workspace_id not in self._entries:
            self._entries.clear()
        self._entries[workspace_id] = entry

    def forget(self, workspace_id: str) -> None:
        self._entries.pop(workspace_id, None)

    def clear(self) -> None:
        self._entries.clear()
