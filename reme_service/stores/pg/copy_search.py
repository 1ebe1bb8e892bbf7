"""Searches of the pgvector store answered from this process's copy of a workspace (`stores/pg/replica.py`).

A workspace of at most `replica_rows` rows is searched in this process's copy of it, brought up to date from the
registry row's `version` before each search: exact, BM25 fused as the in-process stores fuse it
(`stores/inproc/search.py`). The registry rows those searches read are read together when several searches ask at
once (`stores/pg/heads.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit
from reme_service.stores.base import Filter
from reme_service.stores.inproc.packed import compile_stored_filter
from reme_service.stores.inproc.search import run_search
from reme_service.stores.inproc.workspace import WorkspaceState
from reme_service.stores.pg.connections import PgConnections
from reme_service.stores.pg.heads import HeadReads
from reme_service.stores.pg.registry import RegistryCache
from reme_service.stores.pg.replica import Head, Moved, Replicas
from reme_service.stores.spaces import check_space, parse_space, recorded_space, space_of
from reme_service.stores.vectors import QueryVector, as_query


class CopySearches:
    """Searches of the copies in `replicas`, brought up to date on connections of `conns`; `embedder()` is the
    store's embedder now (its space is what a copy's workspace must hold)."""

    def __init__(
        self,
        replicas: Replicas,
        rows: RegistryCache,
        conns: PgConnections,
        embedder: Callable[[], EmbeddingClient],
    ) -> None:
        self._replicas = replicas
        self._rows = rows
        self._conns = conns
        self._embedder = embedder
        first = embedder()
        self._space_text = (first, space_of(first).to_json())  # the embedder's space as the registry records it
        # the registry rows searches of the copies read, several workspaces' in one statement (`pg/heads.py`)
        self._heads: HeadReads[Head] = HeadReads(self._read_heads)

    async def close(self) -> None:
        await self._heads.close()

    def copied(self, workspace_id: str) -> bool:
        """Whether the workspace is searched in this process's copy of it (unless found too big for one now)."""
        if not self._replicas.enabled:
            return False
        entry = self._rows.get(workspace_id)
        return entry is None or not self._replicas.searched_here(entry.tbl)

    async def search(
        self,
        workspace_id: str,
        vector: QueryVector,
        top_k: int,
        filter: Filter | None,
        exact: bool,
        impossible: bool,
        text: str | None = None,
        weight: float = 0.0,
    ) -> list[SearchHit] | None:
        """The search (hybrid with `text`) on this process's up-to-date copy of the workspace, as the in-memory store
        runs it; None when the workspace is searched in PostgreSQL (more rows than `replica_rows`)."""
        predicate = compile_stored_filter(filter)
        holds, state = await self._copy(workspace_id)
        if not holds:
            return []
        if state is None:
            return None
        assert state.dim is not None
        query = as_query(vector, workspace_id, state.dim)
        if impossible:
            return []
        hits = await run_search(state, query, top_k, predicate, exact, text=text, weight=weight)
        self._replicas.searched(workspace_id, state)
        return hits

    def _recorded_space(self) -> str:
        """The store's embedding space as the registry records it (made again only for another embedder)."""
        embedder, text = self._space_text
        current = self._embedder()
        if embedder is not current:
            self._space_text = (current, text := space_of(current).to_json())
        return text

    async def _read_heads(self, workspace_ids: list[str]) -> dict[str, Head]:
        return await self._conns.run("searching", lambda conn: self._replicas.heads(conn, workspace_ids))

    async def _copy(self, workspace_id: str) -> tuple[bool, WorkspaceState | None]:
        """Whether the workspace holds vectors, and its copy brought up to date (None: search it in PostgreSQL). A
        workspace of another embedding space is refused (409). The registry row comes from a read shared with the
        searches that asked at the same time (`pg/heads.py`); a connection is taken only to bring the copy up to
        date."""
        replicas = self._replicas
        for _ in range(3):  # a workspace replaced while its copy catches up is read again
            head = await self._heads.get(workspace_id)
            if head is None or head.dim is None:
                replicas.forget(workspace_id)
                return False, None
            if head.space != self._recorded_space():
                space = recorded_space(parse_space(head.space), head.dim)
                check_space(workspace_id, space, space_of(self._embedder()), "search")
            state = replicas.up_to_date(workspace_id, head)
            if state is not None or replicas.searched_here(head.tbl):
                return True, state
            try:
                catch_up = partial(replicas.current, workspace_id=workspace_id, head=head)
                return True, await self._conns.run("searching", catch_up)
            except Moved:
                continue
        return True, None  # replaced again and again: PostgreSQL answers this one
