"""The Qdrant backend (backend "qdrant"): a Qdrant server (`url`, or `host`/`port`; with none of them, as in ReMe,
the server at localhost:6333 or ReMe's `FLOW_QDRANT_*`: `stores/flow_env.py`), or Qdrant's local mode only when
asked for (`path`, ReMe's `store_dir`, or `location: ":memory:"`), through the async client.

Layout: a workspace is an *alias* (`names.qdrant_alias_name`: the id encoded as for Chroma) of one collection
`<alias>_g<generation>` (dot product over unit vectors: cosine). `replace_workspace` fills a new generation and moves
the alias in one `update_collection_aliases` call, so readers see the old set or the new one, never a mix. Point
ids are UUIDs derived from the node ids (uuid5), the node itself is in the payload (`unique_id`, `content`,
`metadata`, and `seq`, the listing order kept from the first write of an id). An empty workspace does not fix its
dimension: its first vectors do (the collection is made again at their size).

Filters: searches and listings without a filter are Qdrant's own; with one, the candidates are listed and the
full predicate and ranking run here (`remote.py`: exact, like every other backend).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import numpy as np
from numpy.typing import NDArray
from qdrant_client import AsyncQdrantClient, models

from reme_service.errors import StoreError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.schema.workspace_ids import WorkspaceId, validate_workspace_id
from reme_service.stores.filters import Condition
from reme_service.stores.names import check_chroma_prefix, qdrant_alias_name, qdrant_workspace_id
from reme_service.stores.params import QdrantStoreParams
from reme_service.stores.remote import Prepared, RemoteVectorStore
from reme_service.stores.spaces import EmbeddingSpace, parse_space

logger = logging.getLogger(__name__)

T = TypeVar("T")
_IDS = uuid.UUID("6f1d6c2e-6a8e-4d39-9c43-6b0b1a2a5e11")  # the namespace of point ids
_PAGE = 1_000
SPACE_KEY = "reme_embedding_space"  # in each generation's collection metadata


@dataclass(frozen=True, slots=True)
class QdrantFilter:
    """No native clause: without conditions Qdrant's own search is exact, with some the predicate runs here."""

    exact: bool
    impossible: bool = False


def point_id(unique_id: str) -> str:
    return str(uuid.uuid5(_IDS, unique_id))


class QdrantVectorStore(RemoteVectorStore[QdrantFilter]):
    """`summarize` is the base's default (every point scrolled, then counted): Qdrant counts points but has no
    grouping by a payload value nor a maximum of one."""

    backend = "qdrant"

    def __init__(self, params: QdrantStoreParams, *, embedder: EmbeddingClient) -> None:
        super().__init__(embedder=embedder)
        self.params = params
        self.prefix = check_chroma_prefix(params.collection_prefix)
        self._client: AsyncQdrantClient | None = None

    # ----- connection -----

    def _options(self) -> dict[str, Any]:
        p = self.params
        if p.url or p.host:
            return {**self._server_options(), "url": p.url} if p.url else {**self._server_options(), "host": p.host}
        if p.location:
            return {"location": p.location}
        folder = p.path or p.store_dir
        if folder is None:  # ReMe's default: the server on this machine (the factory fills in FLOW_QDRANT_*)
            return {**self._server_options(), "host": "localhost"}
        return {"path": str(folder)}

    def _server_options(self) -> dict[str, Any]:
        """The client's options for a server. No version check: the client runs it in a thread of its own at
        creation and, with the server down, only warns there; `health` reports a server that does not answer."""
        p = self.params
        return {"timeout": int(p.timeout), "api_key": p.api_key, "prefer_grpc": p.prefer_grpc, "port": p.port,
                "check_compatibility": False}  # fmt: skip

    async def start(self) -> None:
        self._client = await asyncio.to_thread(self._connect, self._options())

    @staticmethod
    def _connect(options: dict[str, Any]) -> AsyncQdrantClient:
        """The client (local mode reads its files here: a worker thread, off the loop)."""
        if "path" in options:
            Path(options["path"]).mkdir(parents=True, exist_ok=True)
        return AsyncQdrantClient(**options)

    @property
    def client(self) -> AsyncQdrantClient:
        if self._client is None:
            raise StoreError("the Qdrant store is not started")
        return self._client

    async def close(self) -> None:
        await super().close()
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def _call(self, call: Awaitable[T]) -> T:
        """A client call; a failure of Qdrant (down, refusing) is a StoreError (503)."""
        try:
            return await call
        except (StoreError, ValueError, KeyError):
            raise
        except Exception as exc:  # noqa: BLE001 - the client raises many transport and response types
            where = self.where()
            raise StoreError(f"qdrant request to {where} failed: {type(exc).__name__}: {str(exc)[:300]}") from exc

    def where(self) -> str:
        """The server this store talks to (`scheme://host:port`, never credentials), or its local folder."""
        p = self.params
        if p.url:
            parts = urlsplit(p.url)
            return f"{parts.scheme}://{parts.hostname}:{parts.port or 6333}" if parts.hostname else "the url given"
        options = self._options()
        if "host" in options:
            return f"{options['host']}:{options['port']}"
        return "local mode"

    async def health(self) -> dict[str, Any]:
        mode = "local" if (self.params.path or self.params.store_dir or self.params.location) else "server"
        try:
            await self._call(self.client.get_collections())
        except StoreError as exc:
            return {"status": "down", "backend": self.backend, "mode": mode, "reason": exc.message}
        return {"status": "ok", "backend": self.backend, "mode": mode}

    # ----- workspaces -----

    def _alias(self, workspace_id: WorkspaceId) -> str:
        return qdrant_alias_name(workspace_id, self.prefix)

    async def _target(self, alias: str) -> str | None:
        """The collection an alias points at (None: no such workspace)."""
        aliases = await self._call(self.client.get_aliases())
        return next((a.collection_name for a in aliases.aliases if a.alias_name == alias), None)

    async def exists_workspace(self, workspace_id: str) -> bool:
        workspace_id = validate_workspace_id(workspace_id)
        return await self._target(self._alias(workspace_id)) is not None

    async def list_workspaces(self) -> list[str]:
        aliases = await self._call(self.client.get_aliases())
        found: set[str] = set()
        hashed: list[str] = []
        for alias in aliases.aliases:
            workspace = qdrant_workspace_id(alias.alias_name, self.prefix)
            if workspace is not None:
                found.add(workspace)
            elif alias.alias_name.startswith(self.prefix) and alias.alias_name.endswith("_e"):
                hashed.append(alias.alias_name)
        if hashed:  # a long id's alias is a hash: the registry has the id
            registry = self._registry()
            if await self._call(self.client.collection_exists(registry)):
                points = await self._call(self.client.retrieve(registry, ids=[point_id(a) for a in hashed]))
                found.update(str(p.payload["workspace_id"]) for p in points if p.payload)
        return sorted(found)

    def _registry(self) -> str:
        """The collection that maps hashed aliases (ids too long to encode) to their workspace ids."""
        return f"{self.prefix}_registry"

    async def _register(self, workspace_id: WorkspaceId, alias: str) -> None:
        if qdrant_workspace_id(alias, self.prefix) == workspace_id:
            return  # the alias says it already
        registry = self._registry()
        if not await self._call(self.client.collection_exists(registry)):
            config = models.VectorParams(size=1, distance=models.Distance.COSINE)
            await self._call(self.client.create_collection(registry, vectors_config=config))
        entry = models.PointStruct(id=point_id(alias), vector=[1.0], payload={"workspace_id": workspace_id})
        await self._call(self.client.upsert(registry, points=[entry], wait=True))

    async def create_workspace(self, workspace_id: str) -> None:
        workspace_id = validate_workspace_id(workspace_id)
        async with self._write_lock(workspace_id):
            if await self._target(self._alias(workspace_id)) is None:
                await self._new_generation(workspace_id, self.embedder.dimensions, swap_from=None)

    async def _new_generation(self, workspace_id: WorkspaceId, dim: int, *, swap_from: str | None) -> str:
        """A new empty collection for the workspace; with `swap_from` (the current one) the alias moves to it."""
        alias = self._alias(workspace_id)
        name = f"{alias}_g{self._next_seq()}"
        # dot product over the unit vectors `prepare` made: cosine, without Qdrant normalising them again (which
        # would change the stored vectors in their last bits)
        config = models.VectorParams(size=dim, distance=models.Distance.DOT)
        space = {SPACE_KEY: self.space.model_dump()}  # the generation's embedding space (`stores/spaces.py`)
        await self._call(self.client.create_collection(name, vectors_config=config, metadata=space))
        if swap_from is None:
            await self._register(workspace_id, alias)
            await self._alias_to(alias, name, drop_first=False)
        return name

    async def _alias_to(self, alias: str, collection: str, *, drop_first: bool) -> None:
        """Point `alias` at `collection` in one call (readers never see it missing in between)."""
        operations: list[Any] = []
        if drop_first:
            operations.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
        create = models.CreateAlias(collection_name=collection, alias_name=alias)
        operations.append(models.CreateAliasOperation(create_alias=create))
        await self._call(self.client.update_collection_aliases(change_aliases_operations=operations))

    # ----- the hooks of RemoteVectorStore -----

    def _translate(self, conditions: Iterable[Condition]) -> QdrantFilter:
        return QdrantFilter(exact=not list(conditions))

    async def _stored_dim(self, workspace_id: WorkspaceId) -> int | None:
        collection = await self._target(self._alias(workspace_id))
        if collection is None:
            return None
        info = await self._call(self.client.get_collection(collection))
        if not info.points_count:
            return None  # an empty workspace takes the dimension of its first vectors
        vectors = info.config.params.vectors
        return int(vectors.size) if isinstance(vectors, models.VectorParams) else None

    async def _stored_space(self, workspace_id: WorkspaceId) -> EmbeddingSpace | None:
        collection = await self._target(self._alias(workspace_id))
        if collection is None:
            return None
        info = await self._call(self.client.get_collection(collection))
        return parse_space((info.config.metadata or {}).get(SPACE_KEY))

    async def _points(self, collection: str, *, with_vectors: bool) -> list[Any]:
        points: list[Any] = []
        offset: Any = None
        while True:
            page, offset = await self._call(
                self.client.scroll(collection, limit=_PAGE, offset=offset, with_payload=True, with_vectors=with_vectors)
            )
            points.extend(page)
            if offset is None:
                return points

    def _node(self, workspace_id: WorkspaceId, point: Any, *, with_vector: bool) -> VectorNode:
        payload = point.payload or {}
        vector = np.asarray(point.vector, dtype=np.float32) if with_vector and point.vector is not None else None
        return VectorNode(
            unique_id=str(payload.get("unique_id", "")),
            workspace_id=workspace_id,
            content=str(payload.get("content", "")),
            metadata=dict(payload.get("metadata") or {}),
            vector=vector,
        )

    async def _scan(self, workspace_id: WorkspaceId, native: QdrantFilter, *, with_vectors: bool) -> list[VectorNode]:
        collection = await self._target(self._alias(workspace_id))
        if collection is None:
            return []
        points = await self._points(collection, with_vectors=with_vectors)
        points.sort(key=lambda point: int((point.payload or {}).get("seq", 0)))
        return [self._node(workspace_id, point, with_vector=with_vectors) for point in points]

    async def _search_native(
        self, workspace_id: WorkspaceId, query: NDArray[np.float32], top_k: int, native: QdrantFilter
    ) -> list[SearchHit]:
        alias = self._alias(workspace_id)
        found = await self._call(
            self.client.query_points(alias, query=query.tolist(), limit=top_k, with_payload=True, with_vectors=False)
        )
        return [
            SearchHit(node=self._node(workspace_id, p, with_vector=False), score=min(max(float(p.score), 0.0), 1.0))
            for p in found.points
        ]

    async def _fetch(self, workspace_id: WorkspaceId, ids: list[str]) -> list[VectorNode]:
        collection = await self._target(self._alias(workspace_id))
        if collection is None:
            return []
        points = await self._call(
            self.client.retrieve(collection, ids=[point_id(i) for i in ids], with_payload=True, with_vectors=True)
        )
        return [self._node(workspace_id, point, with_vector=True) for point in points]

    async def _existing_seqs(self, collection: str, ids: list[str]) -> dict[str, int]:
        points = await self._call(
            self.client.retrieve(collection, ids=[point_id(i) for i in ids], with_payload=True, with_vectors=False)
        )
        return {str(p.payload["unique_id"]): int(p.payload.get("seq", 0)) for p in points if p.payload}

    async def _write(self, collection: str, batch: Prepared, seqs: dict[str, int]) -> None:
        """Send the batch in pages of `batch_size` points (each page one request, applied whole)."""
        size = self.params.batch_size
        for start in range(0, len(batch), size):
            points = [
                models.PointStruct(
                    id=point_id(uid),
                    vector=batch.vectors[i].tolist(),
                    payload={
                        "unique_id": uid,
                        "content": batch.contents[i],
                        "metadata": batch.metadatas[i],
                        "seq": seqs.get(uid) or self._next_seq(),
                    },  # fmt: skip
                )
                for i, uid in enumerate(batch.ids[start : start + size], start)
            ]
            await self._call(self.client.upsert(collection, points=points, wait=True))

    async def _commit_upsert(self, workspace_id: WorkspaceId, batch: Prepared) -> int:
        async with self._write_lock(workspace_id):
            alias = self._alias(workspace_id)
            collection = await self._target(alias)
            adopt = False  # an older collection without the space records it with this write
            if collection is not None:
                info = await self._call(self.client.get_collection(collection))
                adopt = parse_space((info.config.metadata or {}).get(SPACE_KEY)) != self.space
                vectors = info.config.params.vectors
                size = vectors.size if isinstance(vectors, models.VectorParams) else None
                if not info.points_count and size != batch.dim:  # still empty: its first vectors set the size
                    old, collection = (
                        collection,
                        await self._new_generation(workspace_id, batch.dim or 1, swap_from=collection),
                    )
                    await self._alias_to(alias, collection, drop_first=True)
                    await self._call(self.client.delete_collection(old))
            else:
                collection = await self._new_generation(workspace_id, batch.dim or 1, swap_from=None)
            seqs = await self._existing_seqs(collection, batch.ids)
            await self._write(collection, batch, seqs)
            if adopt:
                space = {SPACE_KEY: self.space.model_dump()}
                await self._call(self.client.update_collection(collection, metadata=space))
            return len(batch)

    async def _commit_delete(self, workspace_id: WorkspaceId, ids: list[str]) -> int:
        async with self._write_lock(workspace_id):
            collection = await self._target(self._alias(workspace_id))
            if collection is None:
                return 0
            existing = list(await self._existing_seqs(collection, ids))
            if existing:
                selector = models.PointIdsList(points=[point_id(i) for i in existing])
                await self._call(self.client.delete(collection, points_selector=selector, wait=True))
            return len(existing)

    async def _commit_replace(self, workspace_id: WorkspaceId, batch: Prepared) -> int:
        async with self._write_lock(workspace_id):
            alias = self._alias(workspace_id)
            old = await self._target(alias)
            fresh = await self._new_generation(workspace_id, batch.dim or self.embedder.dimensions, swap_from=old or "")
            await self._register(workspace_id, alias)
            try:
                if batch.ids:
                    await self._write(fresh, batch, {})
            except BaseException:
                await self._call(self.client.delete_collection(fresh))
                raise
            await self._alias_to(alias, fresh, drop_first=old is not None)
            if old is not None:
                await self._call(self.client.delete_collection(old))
            return len(batch)

    async def _commit_drop(self, workspace_id: WorkspaceId) -> bool:
        async with self._write_lock(workspace_id):
            alias = self._alias(workspace_id)
            collection = await self._target(alias)
            if collection is None:
                return False
            delete = models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias))
            await self._call(self.client.update_collection_aliases(change_aliases_operations=[delete]))
            await self._call(self.client.delete_collection(collection))
            return True
