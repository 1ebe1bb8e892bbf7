"""What the server-side backends (Chroma, Elasticsearch) share: batch preparation, write serialisation, ordering.

* `prepare` validates a batch, keeps the last version of each id (at its first position), embeds the nodes that
  carry no vector in one call, checks every dimension against the workspace's, and normalises vectors (so the
  backend's cosine equals ours and vectors read back are the ones stored).
* Writes to one workspace run one at a time under an internal lock (not `lock()`, which belongs to callers) and
  as shielded tasks: a cancelled caller never leaves a write half-applied by this process.
* Listing order: each node carries a sequence number, taken from a per-process clock (`time_ns`, strictly
  increasing) when its id is new and kept when it is replaced, so listing by it gives insertion order with a
  replaced node in its old place. (Several processes writing one workspace interleave by their clocks.)
* `exact_top` ranks nodes in numpy: the fallback for filters a backend cannot express exactly.
* The public operations are template methods, written once here: validate the workspace id, plan the filter
  (`remote_filter.plan_filter`), translate what is left into the backend's own filter, answer nothing when the
  plan or the translation says nothing can match, read natively, and apply the full predicate in Python when the
  translation is inexact; writes prepare the batch here and commit it in a shielded task. A backend implements
  the hooks (`_translate`, `_stored_dim`, `_scan`, `_search_native`, `_fetch`, the `_commit_*` writes).
* `lock(workspace)`: with `shared_lock` set (Chroma in server mode, Elasticsearch), a lease in the shared server
  on top of the process's asyncio lock, so read-modify-write flows are safe across service processes.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import orjson
from numpy.typing import NDArray

from reme_service.errors import InvalidRequestError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.schema.workspace_ids import WorkspaceId, validate_workspace_id
from reme_service.stores.base import Filter, VectorStore
from reme_service.stores.filters import Condition
from reme_service.stores.remote_filter import FilterPlan, plan_filter
from reme_service.stores.shared_lock import SharedLock
from reme_service.stores.spaces import EmbeddingSpace, check_space, recorded_space
from reme_service.stores.vectors import (
    QueryVector,
    as_query,
    batch_dimension,
    embed_checked,
    exact_top,
    latest_by_id,
    normalise_rows,
)


class NativeFilter(Protocol):
    """What a backend's translation of the planned conditions reports besides its own clause."""

    @property
    def exact(self) -> bool:
        """The clause selects exactly the matching nodes (else a superset: the predicate must run too)."""

    @property
    def impossible(self) -> bool:
        """No node can match."""


F = TypeVar("F", bound=NativeFilter)


@dataclass(slots=True)
class Prepared:
    """A batch ready to write: unique ids, contents, JSON-copied metadata, unit vectors (n x dim float32)."""

    ids: list[str]
    contents: list[str]
    metadatas: list[dict[str, Any]]
    vectors: NDArray[np.float32]
    dim: int | None

    def __len__(self) -> int:
        return len(self.ids)


def matching(plan: FilterPlan, nodes: list[VectorNode]) -> list[VectorNode]:
    """The nodes that satisfy the plan's full predicate (all of them without a filter)."""
    predicate = plan.predicate
    return nodes if predicate is None else [node for node in nodes if predicate(node)]


class RemoteVectorStore(VectorStore, Generic[F]):
    """Shared plumbing of the Chroma and Elasticsearch stores; `F` is the backend's translated filter."""

    def __init__(self, *, embedder: EmbeddingClient) -> None:
        super().__init__(embedder=embedder)
        self._last_seq = 0
        self.shared_lock: SharedLock | None = None  # set by a backend whose workspace locks span processes

    def lock(self, workspace_id: str) -> AbstractAsyncContextManager[Any]:
        """With a shared lock, the workspace lock also excludes every other process using the same server and
        prefix (a lease record, see `shared_lock.py`); the process's own asyncio lock is taken first."""
        if self.shared_lock is None:
            return super().lock(workspace_id)
        return self.shared_lock.hold(workspace_id, self._locks[workspace_id])

    async def close(self) -> None:
        await super().close()
        if self.shared_lock is not None:
            await self.shared_lock.close()

    def _next_seq(self) -> int:
        self._last_seq = max(time.time_ns(), self._last_seq + 1)
        return self._last_seq

    async def prepare(self, workspace_id: str, nodes: Sequence[VectorNode], dim: int | None) -> Prepared:
        """Validate, embed (one call) and normalise `nodes` against dimension `dim` (None: the first fixes it)."""
        unique = latest_by_id(nodes)
        if not unique:
            return Prepared([], [], [], np.empty((0, dim or 0), np.float32), dim)
        expected = batch_dimension(workspace_id, unique, dim, self.embedder.dimensions)
        missing = [i for i, node in enumerate(unique) if node.vector is None]
        vectors = np.empty((len(unique), expected), np.float32)
        for i, node in enumerate(unique):
            if node.vector is not None:
                vectors[i] = node.vector
        if missing:
            texts = [unique[i].content for i in missing]
            vectors[missing] = await embed_checked(self.embedder, workspace_id, texts, expected)
        metadatas = []
        for node in unique:
            try:
                metadatas.append(orjson.loads(orjson.dumps(node.metadata)))
            except TypeError as exc:
                raise InvalidRequestError(
                    f"the metadata of {node.unique_id!r} is not JSON-serialisable: {exc}"
                ) from exc
        return Prepared(
            [n.unique_id for n in unique], [n.content for n in unique], metadatas, normalise_rows(vectors), expected
        )

    async def copy_workspace(self, src: str, dest: str) -> int:
        """Upsert copies of every node of `src` into `dest`, vectors reused; a new `dest` takes `src`'s dimension.
        Both must be in the store's embedding space."""
        await self.check_space(src, "copy from")
        nodes = await self.list_nodes(src, with_vectors=True)
        if not nodes:
            await self.create_workspace(dest)
            return 0
        await self.upsert(dest, [n.model_copy(update={"workspace_id": dest}) for n in nodes])
        return len(nodes)

    # ----- hooks a backend implements -----

    @abstractmethod
    def _translate(self, conditions: Iterable[Condition]) -> F:
        """The planned conditions (see `plan_filter`) in the backend's own filter language."""

    @abstractmethod
    async def _stored_dim(self, workspace_id: WorkspaceId) -> int | None:
        """The dimension the workspace's vectors must have; None for an unknown workspace (or one that does not
        fix it yet)."""

    async def _stored_space(self, workspace_id: WorkspaceId) -> EmbeddingSpace | None:
        """The embedding space recorded with the workspace (None: unknown workspace, none recorded, or a backend
        that records none: the default). A backend that records one writes it with every upsert and replace."""
        return None

    @abstractmethod
    async def _scan(self, workspace_id: WorkspaceId, native: F, *, with_vectors: bool) -> list[VectorNode]:
        """Every node the native filter selects, in listing order ([] for an unknown workspace)."""

    @abstractmethod
    async def _search_native(
        self, workspace_id: WorkspaceId, query: NDArray[np.float32], top_k: int, native: F
    ) -> list[SearchHit]:
        """The backend's own nearest-neighbour search under an exact native filter, best first."""

    @abstractmethod
    async def _fetch(self, workspace_id: WorkspaceId, ids: list[str]) -> list[VectorNode]:
        """The stored nodes among `ids` (unique), with vectors, in any order ([] for an unknown workspace)."""

    @abstractmethod
    async def _commit_upsert(self, workspace_id: WorkspaceId, batch: Prepared) -> int:
        """Write a prepared, non-empty batch; runs shielded from the caller's cancellation."""

    @abstractmethod
    async def _commit_delete(self, workspace_id: WorkspaceId, ids: list[str]) -> int:
        """Delete these (unique) ids; returns how many existed. Runs shielded."""

    @abstractmethod
    async def _commit_replace(self, workspace_id: WorkspaceId, batch: Prepared) -> int:
        """Make the workspace hold exactly `batch`, atomically. Runs shielded."""

    @abstractmethod
    async def _commit_drop(self, workspace_id: WorkspaceId) -> bool:
        """Drop the workspace; True if it existed. Runs shielded."""

    def _check_batch(self, batch: Prepared) -> None:
        """Refuse a prepared batch the backend cannot store (InvalidRequestError) before anything is written."""

    def _needs_exact_search(self, native: F, query: NDArray[np.float32], top_k: int) -> bool:
        """Whether a search must rank the scanned candidates here instead of asking the backend."""
        return not native.exact

    # ----- the operations, in terms of the hooks -----

    def _plan(self, filter: Mapping[str, Any] | None, workspace_id: WorkspaceId) -> tuple[FilterPlan, F]:
        """Validate and plan `filter` for the workspace, and translate what the plan leaves to the backend."""
        plan = plan_filter(filter, workspace_id)
        return plan, self._translate(plan.conditions)

    async def workspace_space(self, workspace_id: str) -> EmbeddingSpace | None:
        workspace_id = validate_workspace_id(workspace_id)
        dim = await self._stored_dim(workspace_id)
        return None if dim is None else recorded_space(await self._stored_space(workspace_id), dim)

    async def upsert(self, workspace_id: str, nodes: Sequence[VectorNode]) -> int:
        workspace_id = validate_workspace_id(workspace_id)
        await self.check_space(workspace_id, "write to")
        batch = await self.prepare(workspace_id, nodes, await self._stored_dim(workspace_id))
        self._check_batch(batch)
        if not batch.ids:
            await self.create_workspace(workspace_id)
            return 0
        return await self._shielded(self._commit_upsert(workspace_id, batch))

    async def delete_ids(self, workspace_id: str, ids: Sequence[str]) -> int:
        workspace_id = validate_workspace_id(workspace_id)
        unique = list(dict.fromkeys(ids))
        if not unique:
            return 0
        return await self._shielded(self._commit_delete(workspace_id, unique))

    async def replace_workspace(self, workspace_id: str, nodes: Sequence[VectorNode]) -> int:
        workspace_id = validate_workspace_id(workspace_id)
        batch = await self.prepare(workspace_id, nodes, None)
        self._check_batch(batch)
        return await self._shielded(self._commit_replace(workspace_id, batch))

    async def delete_workspace(self, workspace_id: str) -> bool:
        workspace_id = validate_workspace_id(workspace_id)
        return await self._shielded(self._commit_drop(workspace_id))

    async def get(self, workspace_id: str, ids: Sequence[str]) -> list[VectorNode]:
        workspace_id = validate_workspace_id(workspace_id)
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        found = {node.unique_id: node for node in await self._fetch(workspace_id, unique)}
        return [found[uid].model_copy(deep=True) for uid in ids if uid in found]

    async def search_vector(
        self,
        workspace_id: str,
        vector: QueryVector,
        *,
        top_k: int,
        filter: Filter | None = None,
        exact: bool = False,
    ) -> list[SearchHit]:
        workspace_id = validate_workspace_id(workspace_id)
        plan, native = self._plan(filter, workspace_id)
        if top_k <= 0:
            return []
        dim = await self._stored_dim(workspace_id)
        if dim is None:
            return []
        check_space(workspace_id, recorded_space(await self._stored_space(workspace_id), dim), self.space, "search")
        query = as_query(vector, workspace_id, dim)
        if plan.impossible or native.impossible:
            return []
        if exact or self._needs_exact_search(native, query, top_k):  # exact: every matching node, ranked here
            nodes = await self._scan(workspace_id, native, with_vectors=True)
            return exact_top(matching(plan, nodes), query, top_k)
        hits = await self._search_native(workspace_id, query, top_k, native)
        return [hit for hit in hits if plan.predicate is None or plan.predicate(hit.node)]

    async def list_nodes(
        self, workspace_id: str, *, filter: Filter | None = None, with_vectors: bool = False
    ) -> list[VectorNode]:
        workspace_id = validate_workspace_id(workspace_id)
        plan, native = self._plan(filter, workspace_id)
        if plan.impossible or native.impossible:
            return []
        return matching(plan, await self._scan(workspace_id, native, with_vectors=with_vectors))
