"""The vector-store contract every backend implements (async only).

Semantics every backend must honour (`reme_service/testing/contract` checks them). A new backend subclasses
`TemplateVectorStore` (`stores/template.py`), whose public operations keep every rule below that does not
depend on how nodes are stored, and implements its storage hooks (docs/extending.md, "A new store"):

* **Workspaces** are namespaces named by validated ids (1–256 printable characters but `/` and `\\`, not only
  dots; `schema/workspace_ids.py`), each backend encoding them reversibly into its own names. Reads on an
  unknown workspace return empty results, never raise. `upsert` creates the workspace when needed.
* **Upsert by id**: a node whose `unique_id` exists replaces the old one. Nodes that carry a `vector` are stored
  with it (never re-embedded); nodes without one are embedded (their `content`) by the store's embedder, in
  batches. A vector whose dimension differs from the workspace's raises `DimensionMismatchError` naming both.
* **Search** returns at most `top_k` `SearchHit`s ordered by similarity, highest first, each with a score in
  [0, 1] (cosine similarity mapped as `(1 + cos) / 2` is NOT used: the score is `max(cos, 0)`), and only
  nodes matching the filter. `search` embeds the query text; `search_vector` takes a vector.
* **Filters** are a dict; each key is a dotted path into the node's dict form (`unique_id`, `content`,
  `metadata.memory_type`, `metadata.metadata.freq`). A value may be a scalar (equality), a list (membership),
  or a dict of operators `{"eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"}`. All conditions must hold.
  See `stores/filters.py`.
* **Hybrid search** (`search_hybrid`) ranks by the cosine similarity fused with a lexical (BM25) score of the
  query against the nodes' `content`, `(1 - w) * cos + w * bm25 / max(bm25)`, scores in [0, 1]; filters and
  `top_k` as in `search`. Backends without a lexical index fall back to `search` (the default here). A caller
  that has embedded the query already passes its `vector` (with the store's embedder): the store then makes no
  embedding call, so one embedding serves a vector search and a hybrid one.
* **Exact search on request**: the search methods take `exact`; a backend that answers big workspaces from an
  approximate index (the in-process stores past `ann.min_rows`, pgvector's HNSW) ranks every row when it is set.
* **Listing** (`list_nodes`) returns every matching node (no cap) in insertion order; vectors only when asked.
  `list_ids` returns the ids alone, sorted (a stable order to page by).
* **Summary** (`summarize`, `stores/summary.py`): a workspace's size, its memories by `metadata.memory_type`
  (missing: "task") and the latest `metadata.time_modified`; an unknown workspace is empty (size 0). The default
  here lists every node; the in-process stores count their stored metadata without making nodes (and keep the
  counts up to date as they are written), pgvector runs one SQL aggregate. Every override answers as the default.
* **Embedding space** (`stores/spaces.py`): each workspace records the space (provider, model, dimension) of the
  embedder that wrote its vectors. `upsert` and the searches refuse a workspace that holds vectors of another
  space than the store's embedder with `EmbeddingSpaceConflictError` (409) naming both; a workspace with no
  recorded space takes the store's at its next write; `replace_workspace` records the store's space with the new
  set. `workspace_space` tells the recorded space. Every backend records it (one that did not would
  keep only the dimension check: the base's default).
* **replace_workspace** installs a complete new set of nodes atomically: it embeds first and swaps last, so a
  failure leaves the old workspace untouched.
* **Durability** (`local`): a write that returned is on disk; a crash mid-write leaves the previous state.
* **Concurrency**: single operations are atomic; `lock(workspace)` gives callers a per-workspace lock for
  read-modify-write sequences, and for reads of several calls that must see one state (the management export's
  snapshot, `server/export.py`): an asyncio lock, extended across processes by a store several service processes
  share (Chroma in server mode: `shared_lock.py`).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from reme_service.concurrency import OFF_LOOP_ITEMS, off_loop_if
from reme_service.errors import NotFoundError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.stores.spaces import EmbeddingSpace, check_space, space_of
from reme_service.stores.summary import WorkspaceSummary, summarize_metadata
from reme_service.stores.vectors import QueryVector

Filter = dict[str, Any]
T = TypeVar("T")


def consume_exception(future: asyncio.Future[Any]) -> None:
    """Mark a background future's exception as retrieved (its caller may have been cancelled)."""
    if not future.cancelled():
        future.exception()


class VectorStore(ABC):
    """Base class of all backends. Subclasses implement the abstract methods.

    A backend knows nothing of audit, history, size limits or metrics: the factory wraps every backend it builds in
    `storage.guarded.GuardedStore`, which adds them from the outside."""

    backend: str = "abstract"

    def resident_workspaces(self) -> int | None:
        """How many workspaces this store holds in memory; None for stores that hold none (servers)."""
        return None

    def __init__(self, *, embedder: EmbeddingClient) -> None:
        self.embedder = embedder
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._write_locks: dict[str, asyncio.Lock] = {}
        self._pending: set[asyncio.Task[Any]] = set()

    def lock(self, workspace_id: str) -> AbstractAsyncContextManager[Any]:
        """The per-workspace lock callers hold (`async with`) around read-modify-write sequences. Here it excludes
        the other callers of this process; a store shared by several processes extends it across them."""
        return self._locks[workspace_id]

    def _write_lock(self, workspace_id: str) -> asyncio.Lock:
        """The store's own per-workspace write lock (separate from `lock`, so callers holding it can write)."""
        return self._write_locks.setdefault(workspace_id, asyncio.Lock())

    async def _shielded(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a write to completion even if the awaiting caller is cancelled."""
        task = asyncio.ensure_future(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        task.add_done_callback(consume_exception)
        return await asyncio.shield(task)

    @property
    def space(self) -> EmbeddingSpace:
        """The embedding space of the store's embedder: what every write records and every search must match."""
        return space_of(self.embedder)

    async def workspace_space(self, workspace_id: str) -> EmbeddingSpace | None:
        """The space recorded for the workspace's vectors; None for an unknown workspace, one that holds no vectors
        or records no space yet, and on a backend that records none (the default here)."""
        return None

    async def check_space(self, workspace_id: str, action: str) -> None:
        """Raise `EmbeddingSpaceConflictError` (409) when the workspace's vectors come from another space than the
        store's embedder's; `action` ("write to", "search", "copy from") goes into the message."""
        check_space(workspace_id, await self.workspace_space(workspace_id), self.space, action)

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Open connections / load state. Called once by the app."""

    async def close(self) -> None:
        """Flush and release resources; the base waits for writes still running for cancelled callers."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def health(self) -> dict[str, Any]:
        """`{"status": "ok"}` or `{"status": "down", "reason": ...}`."""
        return {"status": "ok", "backend": self.backend}

    @abstractmethod
    async def exists_workspace(self, workspace_id: str) -> bool: ...

    async def require_workspace(self, workspace_id: str) -> None:
        """`NotFoundError` (404) unless the workspace exists: what the management API answers for one it lacks."""
        if not await self.exists_workspace(workspace_id):
            raise NotFoundError("no such workspace", details={"workspace_id": workspace_id})

    @abstractmethod
    async def create_workspace(self, workspace_id: str) -> None: ...

    @abstractmethod
    async def delete_workspace(self, workspace_id: str) -> bool:
        """Drop the workspace; True if it existed."""

    @abstractmethod
    async def list_workspaces(self) -> list[str]: ...

    @abstractmethod
    async def upsert(self, workspace_id: str, nodes: Sequence[VectorNode]) -> int:
        """Insert or replace nodes by id; returns how many were written."""

    @abstractmethod
    async def delete_ids(self, workspace_id: str, ids: Sequence[str]) -> int:
        """Delete nodes by id; returns how many existed and were deleted."""

    @abstractmethod
    async def get(self, workspace_id: str, ids: Sequence[str]) -> list[VectorNode]:
        """The nodes with these ids that exist, in the order asked."""

    @abstractmethod
    async def search_vector(
        self,
        workspace_id: str,
        vector: QueryVector,
        *,
        top_k: int,
        filter: Filter | None = None,
        exact: bool = False,
    ) -> list[SearchHit]:
        """The nearest nodes; `exact` asks for an exhaustive search where the backend would use an approximate
        index (backends that only search one way ignore it)."""

    @abstractmethod
    async def list_nodes(
        self, workspace_id: str, *, filter: Filter | None = None, with_vectors: bool = False
    ) -> list[VectorNode]: ...

    async def list_ids(self, workspace_id: str) -> list[str]:
        """Every node id of the workspace, sorted ([] for an unknown one). Backends that can answer without decoding
        every node override it (the in-process stores do); here it lists the nodes."""
        return sorted(node.unique_id for node in await self.list_nodes(workspace_id))

    async def summarize(self, workspace_id: str) -> WorkspaceSummary:
        """The workspace's size, counts by memory type and latest `time_modified` (`stores/summary.py`); empty for
        an unknown workspace. Here: from every node of `list_nodes`, counted off the event loop when there are many.
        A backend that can count without making every node overrides it, with the same answer."""
        nodes = await self.list_nodes(workspace_id)
        return await off_loop_if(len(nodes) > OFF_LOOP_ITEMS, summarize_metadata, [node.metadata for node in nodes])

    @abstractmethod
    async def replace_workspace(self, workspace_id: str, nodes: Sequence[VectorNode]) -> int:
        """Atomically make the workspace hold exactly `nodes` (embedding those without vectors first)."""

    async def search(
        self, workspace_id: str, query: str, *, top_k: int, filter: Filter | None = None, exact: bool = False
    ) -> list[SearchHit]:
        """Embed `query` and search; an unknown workspace returns [] without an embedding call."""
        if not await self.exists_workspace(workspace_id):
            return []
        await self.check_space(workspace_id, "search")
        vectors = await self.embedder.embed([query])
        return await self.search_vector(workspace_id, vectors[0], top_k=top_k, filter=filter, exact=exact)

    async def search_hybrid(
        self,
        workspace_id: str,
        query: str,
        *,
        top_k: int,
        filter: Filter | None = None,
        lexical_weight: float = 0.3,
        exact: bool = False,
        vector: QueryVector | None = None,
    ) -> list[SearchHit]:
        """Vector similarity fused with a lexical score (see the module docstring); here: plain `search` (by
        `vector` when given: the query embedded already)."""
        if vector is None:
            return await self.search(workspace_id, query, top_k=top_k, filter=filter, exact=exact)
        return await self.search_vector(workspace_id, vector, top_k=top_k, filter=filter, exact=exact)

    async def copy_workspace(self, src: str, dest: str) -> int:
        """Upsert copies of every node of `src` into `dest` (vectors reused); returns the count. Both must be in the
        store's embedding space."""
        await self.check_space(src, "copy from")
        nodes = await self.list_nodes(src, with_vectors=True)
        copies = [n.model_copy(update={"workspace_id": dest}) for n in nodes]
        await self.create_workspace(dest)
        if copies:
            await self.upsert(dest, copies)
        return len(copies)
