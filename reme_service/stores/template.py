"""`TemplateVectorStore`: a backend written as a few storage hooks, the `VectorStore` contract kept here.

The public operations are template methods. They do everything the contract asks that does not depend on how
nodes are kept, so a backend cannot forget it:

* every workspace id is validated (`InvalidRequestError`), every filter parsed before anything is read (an
  unknown operator is a 400 even on an empty workspace), and `top_k <= 0` answers nothing;
* a batch keeps the last version of each id at its first position, nodes without a vector are embedded in one
  call, every vector is checked against the workspace's dimension (`DimensionMismatchError`) and stored at unit
  length, metadata is copied through JSON (so a caller's later change of its dicts changes nothing stored);
* writes refuse a workspace of another embedding space (409), and record the store's space with the vectors;
  searches refuse it too; a workspace without vectors reports no dimension and takes the next write's;
* writes run as shielded tasks, one at a time per workspace (in arrival order), so a cancelled caller never
  leaves a write half-applied and writes to a workspace apply in the order they were made; `create_workspace`
  is idempotent; `replace_workspace` embeds before it calls the hook, so a failed embedding changes nothing;
* reads return copies, in the order the contract gives: `get` in the order asked, each node carrying its
  workspace id and a float32 vector; search hits best first, scores clamped to [0, 1], no vectors, only matching
  nodes, at most `top_k`; `list_nodes` filtered here (a hook may return a superset) and without vectors unless
  asked.

What a backend writes (the abstract methods): `_exists`, `_create`, `_drop`, `list_workspaces`, `_stored_dim`,
`_stored_space`, `_fetch`, `_scan`, `_write`, `_delete`, `_replace`. `_nearest` ranks every matching node exactly
unless the backend overrides it with its own index; `summarize`, `list_ids`, `search`, `search_hybrid` and
`copy_workspace` keep `VectorStore`'s defaults. `docs/extending.md` ("A new store") builds a store on it, and
`reme_service/testing/contract` checks the result.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections import defaultdict
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import orjson
from numpy.typing import NDArray

from reme_service.errors import InvalidRequestError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.schema.workspace_ids import WorkspaceId, validate_workspace_id
from reme_service.stores.base import Filter, VectorStore
from reme_service.stores.filters import compile_filter
from reme_service.stores.spaces import EmbeddingSpace, check_space, recorded_space
from reme_service.stores.vectors import (
    QueryVector,
    as_query,
    batch_dimension,
    dimension_error,
    embed_checked,
    exact_top,
    latest_by_id,
    normalise_rows,
)

T = TypeVar("T")


@dataclass(slots=True)
class Batch:
    """A batch ready to store: unique ids in batch order, contents, JSON-copied metadata, unit vectors (n x `dim`
    float32), and the embedding space to record with them (the store's)."""

    ids: list[str]
    contents: list[str]
    metadatas: list[dict[str, Any]]
    vectors: NDArray[np.float32]
    dim: int | None
    space: EmbeddingSpace

    def __len__(self) -> int:
        return len(self.ids)

    def nodes(self, workspace_id: str) -> list[VectorNode]:
        """The batch as nodes of `workspace_id`, with their vectors (new objects: the store may keep them)."""
        return [
            VectorNode(unique_id=uid, workspace_id=workspace_id, content=content, metadata=metadata, vector=vector)
            for uid, content, metadata, vector in zip(
                self.ids, self.contents, self.metadatas, self.vectors, strict=True
            )
        ]


def json_copy(uid: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """`metadata` copied through JSON (what every backend can store); a 400 naming the node when it is not JSON."""
    try:
        copied: dict[str, Any] = orjson.loads(orjson.dumps(metadata))
    except TypeError as exc:
        raise InvalidRequestError(f"the metadata of {uid!r} is not JSON-serialisable: {exc}") from exc
    return copied


class TemplateVectorStore(VectorStore):
    """A `VectorStore` whose public operations are written here in terms of storage hooks (module docstring)."""

    def __init__(self, *, embedder: EmbeddingClient) -> None:
        super().__init__(embedder=embedder)
        self._commit_locks: defaultdict[WorkspaceId, asyncio.Lock] = defaultdict(asyncio.Lock)

    # ----- the hooks a backend implements -----

    @abstractmethod
    async def _exists(self, workspace_id: WorkspaceId) -> bool:
        """Whether the workspace exists (created, or written to, and not dropped since)."""

    @abstractmethod
    async def _create(self, workspace_id: WorkspaceId) -> None:
        """Make the workspace, empty. Called only when `_exists` said no."""

    @abstractmethod
    async def _drop(self, workspace_id: WorkspaceId) -> bool:
        """Remove the workspace with its nodes and its recorded dimension and space; True if it existed."""

    @abstractmethod
    async def _stored_dim(self, workspace_id: WorkspaceId) -> int | None:
        """The dimension of the workspace's vectors (recorded by `_write` / `_replace`); None for an unknown
        workspace and for one that never held a vector or was replaced by an empty set."""

    @abstractmethod
    async def _stored_space(self, workspace_id: WorkspaceId) -> EmbeddingSpace | None:
        """The space the last `_write` / `_replace` recorded (`batch.space`); None for an unknown workspace."""

    @abstractmethod
    async def _fetch(self, workspace_id: WorkspaceId, ids: list[str]) -> list[VectorNode]:
        """The stored nodes among `ids` (unique, non-empty), in any order; [] for an unknown workspace."""

    @abstractmethod
    async def _scan(self, workspace_id: WorkspaceId, filter: Filter | None, *, with_vectors: bool) -> list[VectorNode]:
        """The workspace's nodes in insertion order (a replaced node keeps its first place); [] for an unknown
        workspace. `filter` (already validated) may narrow the read: the caller applies it again, so returning
        every node is correct. With `with_vectors`, every node carries its vector."""

    @abstractmethod
    async def _write(self, workspace_id: WorkspaceId, batch: Batch) -> None:
        """Insert or replace the batch's nodes by id (a replaced node keeps its place in the insertion order),
        creating the workspace when missing, and record `batch.dim` and `batch.space` with it. Called with a
        non-empty batch, one write per workspace at a time, in a task the caller's cancellation does not stop."""

    @abstractmethod
    async def _delete(self, workspace_id: WorkspaceId, ids: list[str]) -> int:
        """Delete these (unique, non-empty) ids; how many existed (0 for an unknown workspace). Called as `_write`."""

    @abstractmethod
    async def _replace(self, workspace_id: WorkspaceId, batch: Batch) -> None:
        """Make the workspace (created when missing) hold exactly the batch's nodes, in its order, with its
        `dim` and `space` recorded, in one step: a reader sees the old set or the new one. Called as `_write`."""

    async def _nearest(
        self, workspace_id: WorkspaceId, query: NDArray[np.float32], top_k: int, filter: Filter | None, *, exact: bool
    ) -> list[SearchHit]:
        """The `top_k` nodes nearest the unit `query` among those matching `filter`, scored by cosine, best first.
        Here: every matching node ranked exactly (`exact` changes nothing). A backend with an index of its own
        overrides it; its hits are filtered, clamped, sorted and cut again by the caller."""
        predicate = compile_filter(filter)
        nodes = await self._scan(workspace_id, filter, with_vectors=True)
        return exact_top([node for node in nodes if predicate is None or predicate(node)], query, top_k)

    # ----- the operations, in terms of the hooks -----

    async def _committed(self, workspace_id: WorkspaceId, commit: Coroutine[Any, Any, T]) -> T:
        """Run `commit` after the workspace's earlier writes, shielded from the caller's cancellation."""

        async def in_order() -> T:
            async with self._commit_locks[workspace_id]:
                return await commit

        return await self._shielded(in_order())

    async def prepare(self, workspace_id: str, nodes: Sequence[VectorNode], dim: int | None) -> Batch:
        """Validate, embed (one call for the nodes without a vector) and normalise `nodes` against dimension
        `dim` (None: the batch's first vector fixes it, else the embedder's)."""
        unique = latest_by_id(nodes)
        if not unique:
            return Batch([], [], [], np.empty((0, dim or 0), np.float32), dim, self.space)
        expected = batch_dimension(workspace_id, unique, dim, self.embedder.dimensions)
        vectors = np.empty((len(unique), expected), np.float32)
        missing = []
        for i, node in enumerate(unique):
            if node.vector is None:
                missing.append(i)
            else:
                vectors[i] = node.vector
        metadatas = [json_copy(node.unique_id, node.metadata) for node in unique]
        if missing:
            texts = [unique[i].content for i in missing]
            vectors[missing] = await embed_checked(self.embedder, workspace_id, texts, expected)
        return Batch(
            [node.unique_id for node in unique],
            [node.content for node in unique],
            metadatas,
            normalise_rows(vectors),
            expected,
            self.space,
        )

    async def exists_workspace(self, workspace_id: str) -> bool:
        workspace_id = validate_workspace_id(workspace_id)
        return await self._exists(workspace_id)

    async def create_workspace(self, workspace_id: str) -> None:
        await self._ensure(validate_workspace_id(workspace_id))

    async def _ensure(self, workspace_id: WorkspaceId) -> None:
        """Create the workspace unless it exists, after its earlier writes."""

        async def create() -> None:
            if not await self._exists(workspace_id):
                await self._create(workspace_id)

        await self._committed(workspace_id, create())

    async def delete_workspace(self, workspace_id: str) -> bool:
        workspace_id = validate_workspace_id(workspace_id)
        return await self._committed(workspace_id, self._drop(workspace_id))

    async def workspace_space(self, workspace_id: str) -> EmbeddingSpace | None:
        return await self._space(validate_workspace_id(workspace_id))

    async def _space(self, workspace_id: WorkspaceId) -> EmbeddingSpace | None:
        dim = await self._stored_dim(workspace_id)
        return None if dim is None else recorded_space(await self._stored_space(workspace_id), dim)

    async def upsert(self, workspace_id: str, nodes: Sequence[VectorNode]) -> int:
        workspace_id = validate_workspace_id(workspace_id)
        check_space(workspace_id, await self._space(workspace_id), self.space, "write to")
        batch = await self.prepare(workspace_id, nodes, await self._stored_dim(workspace_id))
        if not batch.ids:
            await self._ensure(workspace_id)
            return 0

        async def write() -> int:
            dim = await self._stored_dim(workspace_id)  # a write that went first may have fixed it meanwhile
            if dim is not None and dim != batch.dim:
                raise dimension_error(workspace_id, dim, batch.dim or 0, "the batch's vectors")
            await self._write(workspace_id, batch)
            return len(batch)

        return await self._committed(workspace_id, write())

    async def delete_ids(self, workspace_id: str, ids: Sequence[str]) -> int:
        workspace_id = validate_workspace_id(workspace_id)
        unique = list(dict.fromkeys(ids))
        if not unique:
            return 0
        return await self._committed(workspace_id, self._delete(workspace_id, unique))

    async def replace_workspace(self, workspace_id: str, nodes: Sequence[VectorNode]) -> int:
        workspace_id = validate_workspace_id(workspace_id)
        batch = await self.prepare(workspace_id, nodes, None)
        await self._committed(workspace_id, self._replace(workspace_id, batch))
        return len(batch)

    async def get(self, workspace_id: str, ids: Sequence[str]) -> list[VectorNode]:
        workspace_id = validate_workspace_id(workspace_id)
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        found = {node.unique_id: node for node in await self._fetch(workspace_id, unique)}
        return [self._copy(found[uid], workspace_id, with_vector=True) for uid in unique if uid in found]

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
        predicate = compile_filter(filter)
        if top_k <= 0:
            return []
        dim = await self._stored_dim(workspace_id)
        if dim is None:
            return []
        check_space(workspace_id, recorded_space(await self._stored_space(workspace_id), dim), self.space, "search")
        query = as_query(vector, workspace_id, dim)
        hits = await self._nearest(workspace_id, query, top_k, filter, exact=exact)
        kept = [
            SearchHit(node=self._copy(hit.node, workspace_id, with_vector=False), score=min(max(hit.score, 0.0), 1.0))
            for hit in hits
            if predicate is None or predicate(hit.node)
        ]
        kept.sort(key=lambda hit: -hit.score)
        return kept[:top_k]

    async def list_nodes(
        self, workspace_id: str, *, filter: Filter | None = None, with_vectors: bool = False
    ) -> list[VectorNode]:
        workspace_id = validate_workspace_id(workspace_id)
        predicate = compile_filter(filter)
        nodes = await self._scan(workspace_id, filter, with_vectors=with_vectors)
        return [
            self._copy(node, workspace_id, with_vector=with_vectors)
            for node in nodes
            if predicate is None or predicate(node)
        ]

    @staticmethod
    def _copy(node: VectorNode, workspace_id: WorkspaceId, *, with_vector: bool) -> VectorNode:
        """A copy the caller may change: its own metadata, its workspace's id, a float32 vector or none."""
        vector = np.array(node.vector, dtype=np.float32) if with_vector and node.vector is not None else None
        metadata = orjson.loads(orjson.dumps(node.metadata))
        return node.model_copy(update={"workspace_id": workspace_id, "metadata": metadata, "vector": vector})
