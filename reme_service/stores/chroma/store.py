"""The Chroma backend ("chroma"): a Chroma server (`params.host`, `params.port`) or an embedded persistent Chroma
(`params.store_dir`).

One collection per workspace, named by `stores/names.py` (reversible), with the workspace id also in the
collection's metadata, and so is its embedding space (`reme_embedding_space`, written at creation and by the
first write to an older collection; a replace's staging collection carries the new one). Records: id = node id,
document = content, embedding = the node's unit vector, metadata as in `stores/chroma/where.py` (lossless JSON
copy plus typed leaves for filtering).

Similarity. Collections use Chroma's inner-product space over vectors we normalise, so `1 - distance` is the
cosine; the score is `max(0, 1 - distance)`. (Chroma's "cosine" space gives the same distances but keeps its own
re-normalised copy of each vector, so vectors read back would differ from those written in the last bit.)
Collections created by others in the cosine or l2 space are read with the matching conversion.

Chroma searches an HNSW graph, so an unfiltered search is approximate (`params.hnsw.ef_search` trades speed for
recall); a filtered one is exact in practice. Filters Chroma cannot express (see `chroma/where.py`) are answered
by reading the narrowed candidates and ranking them exactly here.

Writes: Chroma merges metadata on upsert, so the keys of a replaced record that the new version lacks are set to
None (removed); existing records are read first for that and for their listing position. Batches larger than
the server's maximum batch size are written in several requests (each atomic). `replace_workspace` fills a
staging collection, then swaps names (old -> trash, staging -> live) and drops the trash.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from reme_service.errors import StoreError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.schema.workspace_ids import WorkspaceId, validate_workspace_id
from reme_service.stores.chroma.client import ChromaConnection, is_not_found
from reme_service.stores.chroma.lease import ChromaLeases
from reme_service.stores.chroma.where import (
    SEQ_KEY,
    ChromaWhere,
    chroma_where,
    node_metadata,
    record_metadata,
    stale_keys,
)
from reme_service.stores.filters import Condition
from reme_service.stores.names import (
    check_chroma_prefix,
    chroma_collection_name,
    chroma_lock_collection_name,
    chroma_temp_name,
    chroma_workspace_id,
)
from reme_service.stores.params import ChromaStoreParams
from reme_service.stores.remote import Prepared, RemoteVectorStore
from reme_service.stores.remote_filter import check_leaf_counts
from reme_service.stores.shared_lock import SharedLock
from reme_service.stores.spaces import EmbeddingSpace, parse_space
from reme_service.stores.vectors import dimension_error

logger = logging.getLogger(__name__)
T = TypeVar("T")

PAGE = 5_000
_MISSING: Any = object()
_META_WORKSPACE = "reme_workspace_id"
_META_SPACE = "reme_embedding_space"  # the workspace's embedding space as JSON (`stores/spaces.py`)


class ChromaVectorStore(RemoteVectorStore[ChromaWhere]):
    """`summarize` is the base's default (every record listed, then counted): Chroma has no aggregation."""

    backend = "chroma"

    def __init__(self, params: ChromaStoreParams, *, embedder: EmbeddingClient, data_dir: Path | None = None) -> None:
        """Server mode when `params.host` is set; else an embedded Chroma in `params.store_dir`, by default
        `<data_dir>/chroma` (ValueError when neither is given, or for an invalid collection prefix)."""
        super().__init__(embedder=embedder)
        store_dir: Path | None = None
        if not params.host:
            if params.store_dir is not None:
                store_dir = params.store_dir.expanduser().absolute()
            elif data_dir is not None:
                store_dir = (Path(data_dir) / "chroma").expanduser().absolute()
            else:
                raise ValueError("an embedded Chroma needs params.store_dir or a data_dir (or give params.host)")
        self.conn = ChromaConnection(params, store_dir=store_dir)
        self.prefix = check_chroma_prefix(params.collection_prefix)
        self.hnsw = {"space": "ip", **params.hnsw}
        self._collections: dict[str, Any] = {}
        self._dims: dict[str, int] = {}
        self._max_batch: int | None = None
        if params.shared_lock or (params.shared_lock is None and not self.conn.embedded):
            leases = ChromaLeases(self.conn, chroma_lock_collection_name(self.prefix))
            self.shared_lock = SharedLock(leases, ttl=params.lock_ttl, wait=params.lock_wait, where=self.conn.where)

    # ----- lifecycle -----

    async def start(self) -> None:
        try:
            await self.conn.client()
        except StoreError as exc:
            logger.warning("vector store not available at start (requests get 503 until it is): %s", exc.message)

    async def health(self) -> dict[str, Any]:
        info: dict[str, Any] = {"backend": self.backend, "mode": "embedded" if self.conn.embedded else "server"}
        try:
            await self.conn.heartbeat()
        except StoreError as exc:
            return {"status": "down", "reason": exc.message, **info}
        return {"status": "ok", **info}

    async def close(self) -> None:
        await super().close()
        self._collections.clear()
        await self.conn.close()

    # ----- collections -----

    def _forget(self, workspace_id: WorkspaceId) -> None:
        self._collections.pop(workspace_id, None)
        self._dims.pop(workspace_id, None)

    async def _collection(self, workspace_id: WorkspaceId, *, create: bool) -> Any:
        """The workspace's collection handle, or None when it does not exist and `create` is false."""
        handle = self._collections.get(workspace_id)
        if handle is not None:
            return handle
        client = await self.conn.client()
        name = chroma_collection_name(workspace_id, self.prefix)
        if create:
            handle = await self.conn.call(
                client,
                "get_or_create_collection",
                name,
                configuration={"hnsw": self.hnsw},
                metadata={_META_WORKSPACE: workspace_id, _META_SPACE: self.space.to_json()},
                embedding_function=None,
            )
        else:
            try:
                handle = await self.conn.call(client, "get_collection", name, embedding_function=None)
            except Exception as exc:
                if is_not_found(exc):
                    return None
                raise
        self._collections[workspace_id] = handle
        return handle

    async def _on_collection(
        self, workspace_id: WorkspaceId, work: Callable[[Any], Awaitable[T]], *, create: bool
    ) -> T:
        """Run `work(collection)`; `_MISSING` when the workspace does not exist. A handle gone stale (the
        collection was dropped elsewhere) is refreshed once."""
        for attempt in (0, 1):
            handle = await self._collection(workspace_id, create=create)
            if handle is None:
                return cast(T, _MISSING)  # the sentinel every caller tests for
            try:
                return await work(handle)
            except Exception as exc:
                if not is_not_found(exc):
                    raise
                self._forget(workspace_id)
                if attempt:
                    raise StoreError(f"{self.conn.where}: the collection of {workspace_id!r} vanished") from exc
        raise AssertionError("unreachable")

    def _similarity(self, handle: Any) -> Callable[[float], float]:
        config = getattr(handle, "configuration_json", None) or {}
        space = ((config.get("hnsw") or {}).get("space")) or ((config.get("spann") or {}).get("space"))
        space = space or (getattr(handle, "metadata", None) or {}).get("hnsw:space") or "l2"
        if space == "l2":  # squared euclidean distance of unit vectors = 2 - 2 cos
            return lambda distance: min(max(1.0 - distance / 2.0, 0.0), 1.0)
        return lambda distance: min(max(1.0 - distance, 0.0), 1.0)

    async def _dim(self, workspace_id: WorkspaceId, handle: Any) -> int | None:
        """The dimension of the workspace's vectors (None while it holds none)."""
        dim = self._dims.get(workspace_id)
        if dim is None:
            sample = await self.conn.call(handle, "get", limit=1, include=["embeddings"])
            embeddings = sample.get("embeddings")
            if embeddings is not None and len(embeddings):
                dim = self._dims[workspace_id] = len(embeddings[0])
        return dim

    async def _batch_size(self) -> int:
        if self._max_batch is None:
            client = await self.conn.client()
            self._max_batch = max(1, int(await self.conn.call(client, "get_max_batch_size")))
        return self._max_batch

    # ----- records -----

    def _nodes(
        self, workspace_id: WorkspaceId, result: dict[str, Any], *, with_vectors: bool
    ) -> list[tuple[int, VectorNode]]:
        """`(seq, node)` pairs from a `get` result."""
        ids = result.get("ids") or []
        metadatas = result.get("metadatas") or [None] * len(ids)
        documents = result.get("documents") or [None] * len(ids)
        embeddings = result.get("embeddings") if with_vectors else None
        out = []
        for i, uid in enumerate(ids):
            record = metadatas[i] or {}
            vector = np.asarray(embeddings[i], dtype=np.float32) if embeddings is not None else None
            node = VectorNode.model_construct(
                unique_id=uid,
                workspace_id=workspace_id,
                content=documents[i] or "",
                metadata=node_metadata(record),
                vector=vector,
            )
            seq = record.get(SEQ_KEY)
            out.append((seq if isinstance(seq, int) else 0, node))
        return out

    async def _read_all(
        self, workspace_id: WorkspaceId, handle: Any, where: Any, *, with_vectors: bool
    ) -> list[VectorNode]:
        """Every record matching `where`, in listing order. A listing longer than one page is read under the
        workspace's write lock, so the pages agree with each other."""
        include = ["metadatas", "documents", *(["embeddings"] if with_vectors else [])]

        async def page(offset: int) -> dict[str, Any]:
            got: dict[str, Any] = await self.conn.call(
                handle, "get", where=where, limit=PAGE, offset=offset, include=include
            )
            return got

        first = await page(0)
        rows = self._nodes(workspace_id, first, with_vectors=with_vectors)
        if len(rows) >= PAGE:
            async with self._write_lock(workspace_id):
                rows, offset = [], 0
                while True:
                    chunk = self._nodes(workspace_id, await page(offset), with_vectors=with_vectors)
                    rows.extend(chunk)
                    if len(chunk) < PAGE:
                        break
                    offset += PAGE
        rows.sort(key=lambda row: row[0])
        return [node for _, node in rows]

    async def _write(self, handle: Any, batch: Prepared, *, fresh: bool) -> None:
        """Upsert a prepared batch in chunks of the server's batch size; `fresh`: the collection is new."""
        size = await self._batch_size()
        for start in range(0, len(batch), size):
            ids = batch.ids[start : start + size]
            old: dict[str, Any] = {}
            if not fresh:
                existing = await self.conn.call(handle, "get", ids=ids, include=["metadatas"])
                old = dict(zip(existing["ids"], existing["metadatas"] or [], strict=False))
            records = []
            for uid, metadata in zip(ids, batch.metadatas[start : start + size], strict=True):
                previous = old.get(uid) or {}
                seq = previous.get(SEQ_KEY)
                record = record_metadata(uid, seq if isinstance(seq, int) else self._next_seq(), metadata)
                record.update(stale_keys(previous, record))
                records.append(record)
            await self.conn.call(
                handle,
                "upsert",
                ids=ids,
                embeddings=batch.vectors[start : start + size],
                metadatas=records,
                documents=batch.contents[start : start + size],
            )

    # ----- workspaces -----

    async def exists_workspace(self, workspace_id: str) -> bool:
        workspace_id = validate_workspace_id(workspace_id)
        return await self._collection(workspace_id, create=False) is not None

    async def create_workspace(self, workspace_id: str) -> None:
        workspace_id = validate_workspace_id(workspace_id)
        await self._collection(workspace_id, create=True)

    async def _commit_drop(self, workspace_id: WorkspaceId) -> bool:
        async with self._write_lock(workspace_id):
            self._forget(workspace_id)
            client = await self.conn.client()
            try:
                await self.conn.call(client, "delete_collection", chroma_collection_name(workspace_id, self.prefix))
            except Exception as exc:
                if is_not_found(exc):
                    return False
                raise
            return True

    async def list_workspaces(self) -> list[str]:
        client = await self.conn.client()
        total = int(await self.conn.call(client, "count_collections"))
        collections: list[Any] = []
        while len(collections) < total:
            page = await self.conn.call(client, "list_collections", limit=1_000, offset=len(collections))
            if not page:
                break
            collections.extend(page)
        found: set[str] = set()
        for collection in collections:
            workspace = chroma_workspace_id(collection.name, self.prefix)
            if workspace is None and collection.name.startswith(self.prefix) and collection.name.endswith("_e"):
                workspace = (collection.metadata or {}).get(_META_WORKSPACE)  # a long id's hashed name
            if isinstance(workspace, str):
                found.add(workspace)
        return sorted(found)

    # ----- writes -----

    async def _commit_upsert(self, workspace_id: WorkspaceId, batch: Prepared) -> int:
        check_leaf_counts("Chroma", batch.ids, batch.metadatas)

        async def work(handle: Any) -> int:
            dim = await self._dim(workspace_id, handle)
            if dim is not None and batch.dim is not None and dim != batch.dim:
                raise dimension_error(workspace_id, dim, batch.dim, "the batch's vectors")
            await self._write(handle, batch, fresh=False)
            if batch.dim is not None:
                self._dims[workspace_id] = batch.dim
            await self._record_space(handle)
            return len(batch)

        async with self._write_lock(workspace_id):
            return await self._on_collection(workspace_id, work, create=True)

    async def _commit_delete(self, workspace_id: WorkspaceId, ids: list[str]) -> int:
        async def work(handle: Any) -> int:
            present = (await self.conn.call(handle, "get", ids=ids, include=[]))["ids"]
            if present:
                await self.conn.call(handle, "delete", ids=list(present))
            return len(present)

        async with self._write_lock(workspace_id):
            deleted = await self._on_collection(workspace_id, work, create=False)
        return 0 if deleted is _MISSING else deleted

    async def _commit_replace(self, workspace_id: WorkspaceId, batch: Prepared) -> int:
        check_leaf_counts("Chroma", batch.ids, batch.metadatas)
        client = await self.conn.client()
        token = secrets.token_hex(6)
        live = chroma_collection_name(workspace_id, self.prefix)
        staging = chroma_temp_name(workspace_id, "s", token, self.prefix)
        trash = chroma_temp_name(workspace_id, "t", token, self.prefix)
        async with self._write_lock(workspace_id):
            handle = await self.conn.call(
                client,
                "create_collection",
                staging,
                configuration={"hnsw": self.hnsw},
                metadata={_META_WORKSPACE: workspace_id, _META_SPACE: self.space.to_json()},
                embedding_function=None,
            )
            try:
                if batch.ids:
                    await self._write(handle, batch, fresh=True)
                old = await self._collection(workspace_id, create=False)
                if old is not None:
                    await self.conn.call(old, "modify", name=trash)
                try:
                    await self.conn.call(handle, "modify", name=live)
                except BaseException:
                    if old is not None:
                        await self.conn.call(old, "modify", name=live)
                    raise
            except BaseException:
                self._forget(workspace_id)
                await self._drop_quietly(client, staging)
                raise
            self._forget(workspace_id)
            self._collections[workspace_id] = handle
            if batch.dim is not None and batch.ids:
                self._dims[workspace_id] = batch.dim
            if old is not None:
                await self._drop_quietly(client, trash)
        return len(batch)

    async def _drop_quietly(self, client: Any, name: str) -> None:
        try:
            await self.conn.call(client, "delete_collection", name)
        except Exception:  # noqa: BLE001 - a leftover temporary collection is harmless; say so and go on
            logger.warning("could not drop the temporary Chroma collection %s", name, exc_info=True)

    # ----- reads -----

    def _translate(self, conditions: Iterable[Condition]) -> ChromaWhere:
        return chroma_where(conditions)

    async def _stored_dim(self, workspace_id: WorkspaceId) -> int | None:
        dim = await self._on_collection(workspace_id, lambda handle: self._dim(workspace_id, handle), create=False)
        return None if dim is _MISSING else dim

    async def _stored_space(self, workspace_id: WorkspaceId) -> EmbeddingSpace | None:
        """The space in the collection's metadata. A cached handle that says another space than the store's is read
        again once: another process may have re-embedded the workspace (a new collection) since it was cached."""
        for attempt in (0, 1):
            handle = await self._collection(workspace_id, create=False)
            space = None if handle is None else parse_space((handle.metadata or {}).get(_META_SPACE))
            if space is None or space == self.space or attempt:
                return space
            self._forget(workspace_id)
        raise AssertionError("unreachable")

    async def _record_space(self, handle: Any) -> None:
        """Record the store's embedding space in the collection's metadata unless it is there (a collection made
        before spaces were recorded adopts it at its first write)."""
        metadata = dict(handle.metadata or {})
        if parse_space(metadata.get(_META_SPACE)) == self.space:
            return
        metadata = {k: v for k, v in metadata.items() if not k.startswith("hnsw:")}  # Chroma refuses to change these
        await self.conn.call(handle, "modify", metadata={**metadata, _META_SPACE: self.space.to_json()})

    async def _fetch(self, workspace_id: WorkspaceId, ids: list[str]) -> list[VectorNode]:
        async def work(handle: Any) -> list[VectorNode]:
            include = ["metadatas", "documents", "embeddings"]
            result = await self.conn.call(handle, "get", ids=ids, include=include)
            return [node for _, node in self._nodes(workspace_id, result, with_vectors=True)]

        nodes = await self._on_collection(workspace_id, work, create=False)
        return [] if nodes is _MISSING else nodes

    async def _scan(self, workspace_id: WorkspaceId, native: ChromaWhere, *, with_vectors: bool) -> list[VectorNode]:
        async def work(handle: Any) -> list[VectorNode]:
            return await self._read_all(workspace_id, handle, native.where, with_vectors=with_vectors)

        nodes = await self._on_collection(workspace_id, work, create=False)
        return [] if nodes is _MISSING else nodes

    async def _search_native(
        self, workspace_id: WorkspaceId, query: NDArray[np.float32], top_k: int, native: ChromaWhere
    ) -> list[SearchHit]:
        async def work(handle: Any) -> list[SearchHit]:
            result = await self.conn.call(
                handle,
                "query",
                query_embeddings=[query],
                n_results=top_k,
                where=native.where,
                include=["metadatas", "documents", "distances"],
            )
            similarity = self._similarity(handle)
            flat = {key: (value[0] if value else None) for key, value in result.items() if isinstance(value, list)}
            distances = flat.get("distances") or []
            rows = self._nodes(workspace_id, flat, with_vectors=False)
            return [
                SearchHit.model_construct(node=node, score=similarity(float(distance)))
                for (_, node), distance in zip(rows, distances, strict=True)
            ]

        hits = await self._on_collection(workspace_id, work, create=False)
        return [] if hits is _MISSING else hits
