"""`GuardedStore`: the wrapper the factory puts around every vector-store backend.

It answers the whole `VectorStore` contract by calling the backend it holds, and adds, from the outside:

* **metering**: every operation counted and timed into the store's `metrics.Meter` (`observe/metered.measured`);
* **size bounds**: `upsert` and `replace_workspace` refuse a batch holding a memory over `max_memory_bytes` with
  413 before anything is written (`storage/bounds.py`);
* **job gate**: a write made by a background job first passes its gate (`storage.writer.write_gate`), which
  stops a job whose key was revoked or whose workspace was erased;
* **audit and history**: a store bound to a request's `Writer` (`bound`) records each write — `upsert`,
  `delete_ids`, `replace_workspace`, `delete_workspace` and `copy_workspace` — to the writer's audit trail, with
  the memories' history entries (`storage/audit.py`); with a `journal` (`joining`: the state in the pgvector
  store's database) the entries and a draft of the request's audit record are written in the memories' own
  transaction.

The app holds one unbound `GuardedStore` per configured store; each request works on `store.bound(writer)`, a
light view sharing the backend, the meter and the bound. `vectors_only()` is the view a re-embedding writes through:
its writes change vectors, not memories, so they are neither recorded nor size-checked.

Anything that is not part of the contract (a backend's own extras, such as pgvector's `wait_for_indexes`) is
reached through `inner`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from reme_service.observe.metered import measured
from reme_service.observe.metrics import Meter
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.storage.audit import (
    Journal,
    audited_delete_ids,
    audited_delete_workspace,
    audited_upsert,
)
from reme_service.storage.bounds import DEFAULT_MAX_MEMORY_BYTES, check_sizes
from reme_service.storage.writer import Writer, pass_write_gate
from reme_service.stores.base import Filter, VectorStore
from reme_service.stores.spaces import EmbeddingSpace
from reme_service.stores.summary import WorkspaceSummary
from reme_service.stores.vectors import QueryVector


class GuardedStore(VectorStore):
    """A backend with metering, size bounds and (when bound to a writer) audit. See the module docstring."""

    def __init__(
        self,
        inner: VectorStore,
        *,
        meter: Meter | None = None,
        max_memory_bytes: int | None = DEFAULT_MAX_MEMORY_BYTES,
        writer: Writer | None = None,
        check_bounds: bool = True,
        journal: Journal | None = None,
    ) -> None:
        # not `super().__init__`: the wrapper keeps no locks or tasks of its own; the backend's are the store's
        self.inner = inner
        self.embedder = inner.embedder
        self.backend = inner.backend
        self.meter = meter
        self.max_memory_bytes = max_memory_bytes
        self.writer = writer
        self._check_bounds = check_bounds
        self.journal = journal

    def joining(self, journal: Journal | None) -> GuardedStore:
        """This store writing the history entries and audit drafts of `journal` in its own write transactions, when
        the journal joins the backend (same database); else this store as it is."""
        if journal is None or not journal.joins(self.inner):
            return self
        return GuardedStore(self.inner, meter=self.meter, max_memory_bytes=self.max_memory_bytes, journal=journal)

    # -- views ------------------------------------------------------------------------------------------

    def bound(self, writer: Writer | None) -> GuardedStore:
        """This store, recording its writes for `writer` (None: recording nothing)."""
        return GuardedStore(
            self.inner, meter=self.meter, max_memory_bytes=self.max_memory_bytes, writer=writer, journal=self.journal
        )

    def vectors_only(self) -> GuardedStore:
        """This store for writes that change vectors, not memories (a re-embedding writes every memory back with
        new vectors): nothing recorded — no history entries, no change events, nothing scrubbed — and no size
        check (the memories are stored already)."""
        return GuardedStore(self.inner, meter=self.meter, max_memory_bytes=None, writer=None, check_bounds=False)

    def _bounded(self, nodes: Sequence[VectorNode]) -> None:
        if self._check_bounds:
            check_sizes(nodes, self.max_memory_bytes)

    # -- the contract: writes ------------------------------------------------------------------------------

    async def upsert(self, workspace_id: str, nodes: Sequence[VectorNode]) -> int:
        await pass_write_gate()
        self._bounded(nodes)
        inner, writer = self.inner, self.writer
        if writer is None:
            return await measured(self.meter, "upsert", inner.upsert(workspace_id, nodes))
        write = audited_upsert(
            inner, writer, workspace_id, nodes, lambda store: store.upsert(workspace_id, nodes), journal=self.journal
        )
        return await measured(self.meter, "upsert", write)

    async def replace_workspace(self, workspace_id: str, nodes: Sequence[VectorNode]) -> int:
        await pass_write_gate()
        self._bounded(nodes)
        inner, writer = self.inner, self.writer
        if writer is None:
            return await measured(self.meter, "replace_workspace", inner.replace_workspace(workspace_id, nodes))
        write = audited_upsert(
            inner, writer, workspace_id, nodes, lambda store: store.replace_workspace(workspace_id, nodes),
            replace=True, journal=self.journal,
        )  # fmt: skip
        return await measured(self.meter, "replace_workspace", write)

    async def delete_ids(self, workspace_id: str, ids: Sequence[str]) -> int:
        await pass_write_gate()
        inner, writer = self.inner, self.writer
        if writer is None:
            return await measured(self.meter, "delete_ids", inner.delete_ids(workspace_id, ids))
        write = audited_delete_ids(
            inner, writer, workspace_id, ids, lambda store: store.delete_ids(workspace_id, ids), journal=self.journal
        )
        return await measured(self.meter, "delete_ids", write)

    async def delete_workspace(self, workspace_id: str) -> bool:
        await pass_write_gate()
        inner, writer = self.inner, self.writer
        if writer is None:
            return await measured(self.meter, "delete_workspace", inner.delete_workspace(workspace_id))
        write = audited_delete_workspace(
            inner, writer, workspace_id, lambda store: store.delete_workspace(workspace_id), journal=self.journal
        )
        return await measured(self.meter, "delete_workspace", write)

    async def copy_workspace(self, src: str, dest: str) -> int:
        """The backend's copy; bound to a writer, an upsert of the copies recorded as one (the backend's copy is
        exactly that: the source's nodes, vectors reused, upserted into `dest`)."""
        if self.writer is None:
            return await measured(self.meter, "copy_workspace", self.inner.copy_workspace(src, dest))
        return await measured(self.meter, "copy_workspace", self._recorded_copy(src, dest, self.writer))

    async def _recorded_copy(self, src: str, dest: str, writer: Writer) -> int:
        inner = self.inner
        await inner.check_space(src, "copy from")
        nodes = await inner.list_nodes(src, with_vectors=True)
        if not nodes:
            await inner.create_workspace(dest)
            return 0
        copies = [n.model_copy(update={"workspace_id": dest}) for n in nodes]
        await audited_upsert(
            inner, writer, dest, copies, lambda store: store.upsert(dest, copies), journal=self.journal
        )
        return len(copies)

    async def create_workspace(self, workspace_id: str) -> None:
        await self.inner.create_workspace(workspace_id)

    # -- the contract: reads -------------------------------------------------------------------------------

    async def get(self, workspace_id: str, ids: Sequence[str]) -> list[VectorNode]:
        return await measured(self.meter, "get", self.inner.get(workspace_id, ids))

    async def search_vector(
        self,
        workspace_id: str,
        vector: QueryVector,
        *,
        top_k: int,
        filter: Filter | None = None,
        exact: bool = False,
    ) -> list[SearchHit]:
        call = self.inner.search_vector(workspace_id, vector, top_k=top_k, filter=filter, exact=exact)
        return await measured(self.meter, "search_vector", call)

    async def search(
        self, workspace_id: str, query: str, *, top_k: int, filter: Filter | None = None, exact: bool = False
    ) -> list[SearchHit]:
        call = self.inner.search(workspace_id, query, top_k=top_k, filter=filter, exact=exact)
        return await measured(self.meter, "search", call)

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
        call = self.inner.search_hybrid(
            workspace_id, query, top_k=top_k, filter=filter, lexical_weight=lexical_weight, exact=exact, vector=vector
        )
        return await measured(self.meter, "search_hybrid", call)

    async def list_nodes(
        self, workspace_id: str, *, filter: Filter | None = None, with_vectors: bool = False
    ) -> list[VectorNode]:
        call = self.inner.list_nodes(workspace_id, filter=filter, with_vectors=with_vectors)
        return await measured(self.meter, "list_nodes", call)

    async def list_ids(self, workspace_id: str) -> list[str]:
        return await self.inner.list_ids(workspace_id)

    async def summarize(self, workspace_id: str) -> WorkspaceSummary:
        return await measured(self.meter, "summarize", self.inner.summarize(workspace_id))

    async def list_workspaces(self) -> list[str]:
        return await measured(self.meter, "list_workspaces", self.inner.list_workspaces())

    async def exists_workspace(self, workspace_id: str) -> bool:
        return await self.inner.exists_workspace(workspace_id)

    async def require_workspace(self, workspace_id: str) -> None:
        await self.inner.require_workspace(workspace_id)

    # -- the contract: spaces, locks, lifecycle -----------------------------------------------------------------

    @property
    def space(self) -> EmbeddingSpace:
        return self.inner.space

    async def workspace_space(self, workspace_id: str) -> EmbeddingSpace | None:
        return await self.inner.workspace_space(workspace_id)

    async def check_space(self, workspace_id: str, action: str) -> None:
        await self.inner.check_space(workspace_id, action)

    def lock(self, workspace_id: str) -> AbstractAsyncContextManager[Any]:
        return self.inner.lock(workspace_id)

    def resident_workspaces(self) -> int | None:
        return self.inner.resident_workspaces()

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def health(self) -> dict[str, Any]:
        return await self.inner.health()
