"""The Elasticsearch backend ("elasticsearch"): `AsyncElasticsearch`, one index per workspace.

Names. A workspace is an alias (`stores/names.py`) pointing at one concrete index `<alias>_<generation>`; the
workspace id is also kept in the index's `_meta`, and so is its embedding space (`stores/spaces.py`: set when an
index is made by a write or a replace; an index made empty, or by an older version, takes it at its first write,
through a `_meta` mapping update). `replace_workspace` fills a new index and then swaps the alias
and drops the old index in one atomic `_aliases` call, so readers see the old or the new set, never a mix.

Documents, mapping and filters: `stores/es/query.py`. The vector field is a float `dense_vector` with HNSW and
cosine similarity, its `dims` taken from the first vectors written (the embedder's dimension for an empty
workspace created explicitly); a write whose vectors differ from an index's `dims` is refused with a 400 naming
both, before anything is sent.

Writes go through `_bulk` (to the alias, with `require_alias` so a concurrently dropped workspace is never
auto-created with a dynamic mapping), in chunks of `batch_size`, with `refresh` on the last chunk so the next
read sees them; every item's result is checked and failures are reported by id. Search is `knn` with the
filter as a pre-filter; `hybrid` adds a BM25 `match` on the content and fuses both rankings by reciprocal rank.
Listing pages with `search_after` on `(seq, unique_id)`, so it has no 10,000 cap.

Workspace locks are shared by every process on the cluster (unless `shared_lock` is off): lease documents in
the index `<prefix>_0locks`, written with Elasticsearch's conditional writes (`stores/es/lease.py`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from elastic_transport import ApiError as TransportApiError, TransportError
from elasticsearch import ApiError, AsyncElasticsearch
from numpy.typing import NDArray

try:
    from elasticsearch.serializer import OrjsonSerializer
except ImportError:  # pragma: no cover - elasticsearch without orjson support
    OrjsonSerializer = None  # type: ignore[assignment,misc]

from reme_service.errors import InvalidRequestError, ReMeError, StoreError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.schema.workspace_ids import WorkspaceId, parse_workspace_id, validate_workspace_id
from reme_service.stores.base import Filter
from reme_service.stores.es.lease import EsLeases
from reme_service.stores.es.query import (
    META_SPACE,
    META_WORKSPACE,
    SOURCE_WITH_VECTORS,
    SOURCE_WITHOUT_VECTORS,
    EsFilter,
    bm25_body,
    cosine_from_score,
    decode_vector,
    document,
    es_filter,
    index_body,
    index_meta,
    knn_body,
    mapping_dims,
    reciprocal_rank_fusion,
)
from reme_service.stores.filters import Condition
from reme_service.stores.names import check_es_prefix, es_alias_name, es_index_name, es_lock_index_name
from reme_service.stores.params import ElasticsearchStoreParams
from reme_service.stores.remote import Prepared, RemoteVectorStore
from reme_service.stores.remote_filter import check_leaf_counts
from reme_service.stores.shared_lock import SharedLock
from reme_service.stores.spaces import EmbeddingSpace, parse_space
from reme_service.stores.vectors import QueryVector, as_query, dimension_error

logger = logging.getLogger(__name__)

MAX_KNN = 10_000  # Elasticsearch's limit for k and num_candidates
_MISSING_TYPES = ("index_not_found_exception", "alias_missing_exception")


def _reason(exc: ApiError | TransportApiError) -> str:
    """The error type and reason Elasticsearch gave, or the message."""
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    if isinstance(error, dict):
        return f"{error.get('type', '')}: {error.get('reason', '')}".strip(": ")
    return str(error or exc.message)


def _without_userinfo(host: str) -> str:
    """`host` as messages and `/health` may show it: `http://elastic:pw@es:9200` -> `http://es:9200`."""
    parts = urlsplit(host)
    if "@" not in parts.netloc:
        return host
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _scrubbed(text: str, hosts: list[str]) -> str:
    """`text` (a transport error's words) with the hosts' credentials cut out, should it quote a host URL."""
    for host in hosts:
        netloc = urlsplit(host).netloc
        if "@" in netloc:
            text = text.replace(netloc.rpartition("@")[0] + "@", "")
    return text


def _missing(exc: ApiError) -> bool:
    return exc.meta.status == 404


def _node(hit: dict[str, Any], workspace_id: WorkspaceId, *, with_vectors: bool) -> VectorNode:
    source = hit.get("_source") or {}
    metadata = source.get("metadata")
    return VectorNode.model_construct(
        unique_id=str(source.get("unique_id", hit.get("_id"))),
        workspace_id=workspace_id,
        content=source.get("content") or "",
        metadata=metadata if isinstance(metadata, dict) else {},
        vector=decode_vector(source) if with_vectors else None,
    )


class ElasticsearchVectorStore(RemoteVectorStore[EsFilter]):
    """`summarize` is the base's default (every document listed, then counted). An aggregation would have to run on
    the nested typed leaves (`es/query.py`: `metadata` itself is stored unindexed): a `nested` + `filter` on the
    path, `terms` on the string leaf, with the nodes lacking the path counted apart, and the latest time a `terms`
    ordered by key (a `max` takes numbers only); the test server (`tests/fakes/es_server.py`) answers no
    aggregations, so that would ship untested."""

    backend = "elasticsearch"

    def __init__(self, params: ElasticsearchStoreParams, *, embedder: EmbeddingClient) -> None:
        """ValueError for an invalid index prefix or a malformed `basic_auth`."""
        super().__init__(embedder=embedder)
        self.params = params
        self.hosts = params.host_list()
        self.shown_hosts = ", ".join(_without_userinfo(h) for h in self.hosts)  # for messages: never a password
        self.prefix = check_es_prefix(params.index_prefix)
        self.batch_size = params.batch_size
        self.list_page_size = min(params.list_page_size, MAX_KNN)
        self.hybrid = params.hybrid
        options = params.client_options()
        if OrjsonSerializer is not None:  # several times faster than the stdlib json on listings
            options.setdefault("serializer", OrjsonSerializer())
        self.es = AsyncElasticsearch(self.hosts, **options)
        self._dims: dict[str, int] = {}
        self._spaces: dict[str, EmbeddingSpace | None] = {}  # from the last mapping read; checked again on mismatch
        if params.shared_lock:
            leases = EsLeases(self.es, es_lock_index_name(self.prefix), self._guard)
            where = f"elasticsearch {_without_userinfo(self.hosts[0])}"
            self.shared_lock = SharedLock(leases, ttl=params.lock_ttl, wait=params.lock_wait, where=where)

    # ----- plumbing -----

    def _alias(self, workspace_id: WorkspaceId) -> str:
        return es_alias_name(workspace_id, self.prefix)

    @asynccontextmanager
    async def _guard(self, action: str) -> AsyncIterator[None]:
        try:
            yield
        except ReMeError:
            raise
        except (ApiError, TransportApiError) as exc:
            raise StoreError(f"elasticsearch: {action} failed ({exc.meta.status}): {_reason(exc)}") from exc
        except TransportError as exc:
            detail = _scrubbed(str(exc), self.hosts)
            raise StoreError(
                f"elasticsearch at {self.shown_hosts} is unreachable ({action}): {type(exc).__name__}: {detail}"
            ) from exc

    async def start(self) -> None:
        try:
            async with self._guard("info"):
                await self.es.info()
        except StoreError as exc:
            logger.warning("vector store not available at start (requests get 503 until it is): %s", exc.message)

    async def health(self) -> dict[str, Any]:
        try:
            async with self._guard("info"):
                info = await self.es.info()
        except StoreError as exc:
            return {"status": "down", "reason": exc.message, "backend": self.backend}
        return {"status": "ok", "backend": self.backend, "version": info.get("version", {}).get("number")}

    async def close(self) -> None:
        await super().close()
        await self.es.close()

    async def _dims_of(self, workspace_id: WorkspaceId) -> int | None:
        """The vector dimension of the workspace's index; None when the workspace does not exist."""
        if workspace_id in self._dims:
            return self._dims[workspace_id]
        await self._read_mapping(workspace_id)
        return self._dims.get(workspace_id)

    async def _read_mapping(self, workspace_id: WorkspaceId) -> None:
        """Cache the dimension and the embedding space of the workspace's index (nothing for an unknown one)."""
        self._dims.pop(workspace_id, None)
        self._spaces.pop(workspace_id, None)
        async with self._guard("get mapping"):
            try:
                response = await self.es.indices.get_mapping(index=self._alias(workspace_id))
            except ApiError as exc:
                if _missing(exc):
                    return
                raise
        for info in response.body.values():
            mappings = info.get("mappings", {})
            dims = mapping_dims(mappings)
            if dims is not None:
                self._dims[workspace_id] = dims
                self._spaces[workspace_id] = parse_space((mappings.get("_meta") or {}).get(META_SPACE))
                return

    async def _stored_space(self, workspace_id: WorkspaceId) -> EmbeddingSpace | None:
        """The space in the index's `_meta`. A cached one other than the store's is read again: another process may
        have re-embedded the workspace (a new index) since."""
        if workspace_id not in self._spaces or self._spaces[workspace_id] != self.space:
            await self._read_mapping(workspace_id)
        return self._spaces.get(workspace_id)

    async def _create_index(
        self, workspace_id: WorkspaceId, index: str, dims: int, *, with_alias: bool, with_space: bool = True
    ) -> None:
        """Create an index; `with_space` records the store's embedding space in it (not for an empty workspace made
        by `create_workspace`: that one takes the space of its first write)."""
        body = index_body(
            workspace_id,
            dims,
            settings=self.params.index_settings,
            m=self.params.hnsw_m,
            ef_construction=self.params.hnsw_ef_construction,
            space=self.space.model_dump() if with_space else None,
        )
        aliases: dict[str, dict[str, Any]] | None = {self._alias(workspace_id): {}} if with_alias else None
        async with self._guard("create index"):
            try:
                await self.es.indices.create(
                    index=index, settings=body["settings"], mappings=body["mappings"], aliases=aliases
                )
            except ApiError as exc:
                if _reason(exc).startswith("resource_already_exists_exception") and with_alias:
                    return
                raise

    async def _bulk(
        self, operations: list[dict[str, Any]], *, refresh: bool, require_alias: bool
    ) -> list[dict[str, Any]]:
        """Send one bulk request; returns each item's result object."""
        async with self._guard("bulk"):
            response = await self.es.bulk(
                operations=operations, refresh=self.params.refresh if refresh else "false", require_alias=require_alias
            )
        return [next(iter(item.values())) for item in response.body.get("items", [])]

    @staticmethod
    def _raise_item_errors(items: Sequence[dict[str, Any]], total: int) -> None:
        failed = [item for item in items if "error" in item]
        if not failed:
            return
        shown = "; ".join(
            f"{item.get('_id')}: {item['error'].get('type')}: {item['error'].get('reason')}" for item in failed[:5]
        )
        raise StoreError(
            f"elasticsearch refused {len(failed)} of {total} documents (the others were written): {shown}",
            details={"failed_ids": [item.get("_id") for item in failed]},
        )

    async def _write(
        self, target: str, workspace_id: WorkspaceId, batch: Prepared, *, fresh: bool, alias: bool
    ) -> None:
        seqs: dict[str, int] = {} if fresh else await self._existing_seqs(target, batch.ids)
        chunks = range(0, len(batch), self.batch_size)
        for start in chunks:
            operations: list[dict[str, Any]] = []
            for i in range(start, min(start + self.batch_size, len(batch))):
                uid = batch.ids[i]
                seq = seqs.get(uid) or self._next_seq()
                doc = document(uid, workspace_id, batch.contents[i], batch.metadatas[i], seq, batch.vectors[i])
                operations += [{"index": {"_index": target, "_id": uid}}, doc]
            items = await self._bulk(operations, refresh=start == chunks[-1], require_alias=alias)
            self._raise_item_errors(items, len(operations) // 2)

    async def _existing_seqs(self, target: str, ids: Sequence[str]) -> dict[str, int]:
        seqs: dict[str, int] = {}
        for start in range(0, len(ids), self.batch_size):
            async with self._guard("mget"):
                response = await self.es.mget(
                    index=target, ids=list(ids[start : start + self.batch_size]), source_includes=["seq"]
                )
            for doc in response.body.get("docs", []):
                seq = (doc.get("_source") or {}).get("seq") if doc.get("found") else None
                if isinstance(seq, int):
                    seqs[doc["_id"]] = seq
        return seqs

    # ----- workspaces -----

    async def exists_workspace(self, workspace_id: str) -> bool:
        workspace_id = validate_workspace_id(workspace_id)
        async with self._guard("exists"):
            return bool(await self.es.indices.exists(index=self._alias(workspace_id)))

    async def create_workspace(self, workspace_id: str, dims: int | None = None) -> None:
        workspace_id = validate_workspace_id(workspace_id)
        async with self._write_lock(workspace_id):
            if await self._dims_of(workspace_id) is None and not await self.exists_workspace(workspace_id):
                dims = dims or self.embedder.dimensions
                await self._create_index(
                    workspace_id, es_index_name(self._alias(workspace_id), 0), dims, with_alias=True, with_space=False
                )
                self._dims[workspace_id] = dims
                self._spaces[workspace_id] = None

    async def _commit_drop(self, workspace_id: WorkspaceId) -> bool:
        async with self._write_lock(workspace_id), self._guard("delete index"):
            self._dims.pop(workspace_id, None)
            self._spaces.pop(workspace_id, None)
            try:
                response = await self.es.indices.get_alias(name=self._alias(workspace_id))
            except ApiError as exc:
                if _missing(exc):
                    return False
                raise
            indices = sorted(response.body)
            if not indices:
                return False
            await self.es.indices.delete(index=",".join(indices))
            return True

    async def list_workspaces(self) -> list[str]:
        async with self._guard("list indices"):
            response = await self.es.indices.get(index=f"{self.prefix}*", expand_wildcards="open")
        found: set[str] = set()
        for info in response.body.values():
            recorded = (info.get("mappings", {}).get("_meta") or {}).get(META_WORKSPACE)
            workspace_id = parse_workspace_id(recorded) if isinstance(recorded, str) else None
            if workspace_id is not None and self._alias(workspace_id) in (info.get("aliases") or {}):
                found.add(workspace_id)
        return sorted(found)

    # ----- writes -----

    async def _commit_upsert(self, workspace_id: WorkspaceId, batch: Prepared) -> int:
        assert batch.dim is not None
        check_leaf_counts("Elasticsearch", batch.ids, batch.metadatas)
        async with self._write_lock(workspace_id):
            dims = await self._dims_of(workspace_id)
            alias = self._alias(workspace_id)
            if dims is None:
                await self._create_index(workspace_id, es_index_name(alias, 0), batch.dim, with_alias=True)
                self._dims[workspace_id] = dims = batch.dim
                self._spaces[workspace_id] = self.space
            if dims != batch.dim:
                raise dimension_error(workspace_id, dims, batch.dim, "the batch's vectors")
            try:
                await self._write(alias, workspace_id, batch, fresh=False, alias=True)
                if await self._stored_space(workspace_id) != self.space:  # an older index adopts the space
                    meta = index_meta(workspace_id, self.space.model_dump())
                    async with self._guard("put mapping"):
                        await self.es.indices.put_mapping(index=alias, meta=meta)
                    self._spaces[workspace_id] = self.space
            except StoreError:
                self._dims.pop(workspace_id, None)  # e.g. the workspace was dropped meanwhile: look again next time
                raise
        return len(batch)

    async def _commit_delete(self, workspace_id: WorkspaceId, ids: list[str]) -> int:
        alias = self._alias(workspace_id)
        deleted = 0
        async with self._write_lock(workspace_id):
            for start in range(0, len(ids), self.batch_size):
                chunk = ids[start : start + self.batch_size]
                operations = [{"delete": {"_index": alias, "_id": uid}} for uid in chunk]
                items = await self._bulk(operations, refresh=True, require_alias=True)
                if any(item.get("error", {}).get("type") in _MISSING_TYPES for item in items):
                    return deleted  # the workspace does not exist
                self._raise_item_errors(items, len(chunk))
                deleted += sum(1 for item in items if item.get("result") == "deleted")
        return deleted

    async def _commit_replace(self, workspace_id: WorkspaceId, batch: Prepared) -> int:
        check_leaf_counts("Elasticsearch", batch.ids, batch.metadatas)
        alias = self._alias(workspace_id)
        index = es_index_name(alias, time.time_ns())
        dims = batch.dim or self.embedder.dimensions
        async with self._write_lock(workspace_id):
            await self._create_index(workspace_id, index, dims, with_alias=False)
            try:
                if batch.ids:
                    await self._write(index, workspace_id, batch, fresh=True, alias=False)
                async with self._guard("get alias"):
                    try:
                        old = sorted((await self.es.indices.get_alias(name=alias)).body)
                    except ApiError as exc:
                        if not _missing(exc):
                            raise
                        old = []
                actions: list[dict[str, Any]] = [{"add": {"index": index, "alias": alias}}]
                actions += [{"remove_index": {"index": name}} for name in old]
                async with self._guard("swap alias"):
                    await self.es.indices.update_aliases(actions=actions)
            except BaseException:
                await self._drop_quietly(index)
                raise
            finally:
                self._dims.pop(workspace_id, None)
                self._spaces.pop(workspace_id, None)
            self._dims[workspace_id] = dims
            self._spaces[workspace_id] = self.space
        return len(batch)

    async def _drop_quietly(self, index: str) -> None:
        try:
            async with self._guard("delete index"):
                await self.es.indices.delete(index=index)
        except Exception:  # noqa: BLE001 - a leftover staging index is harmless; say so and go on
            logger.warning("could not drop the staging index %s", index, exc_info=True)

    # ----- reads -----

    def _translate(self, conditions: Iterable[Condition]) -> EsFilter:
        return es_filter(conditions)

    async def _stored_dim(self, workspace_id: WorkspaceId) -> int | None:
        return await self._dims_of(workspace_id)

    def _check_batch(self, batch: Prepared) -> None:
        if len(batch) and not np.linalg.norm(batch.vectors, axis=1).all():
            zero = [uid for uid, row in zip(batch.ids, batch.vectors, strict=True) if not row.any()]
            raise InvalidRequestError(
                f"node {zero[0]!r} has an all-zero vector, which Elasticsearch's cosine similarity cannot index",
                details={"ids": zero[:10]},
            )

    def _needs_exact_search(self, native: EsFilter, query: NDArray[np.float32], top_k: int) -> bool:
        """Also beyond kNN's limit, and for the zero query (cosine kNN cannot take it)."""
        return not native.exact or top_k > MAX_KNN or not query.any()

    async def _fetch(self, workspace_id: WorkspaceId, ids: list[str]) -> list[VectorNode]:
        async with self._guard("mget"):
            try:
                response = await self.es.mget(
                    index=self._alias(workspace_id), ids=ids, source_excludes=["vector", "leaves"]
                )
            except ApiError as exc:
                if _missing(exc):
                    return []
                raise
        docs = response.body.get("docs", [])
        return [_node(doc, workspace_id, with_vectors=True) for doc in docs if doc.get("found")]

    async def _search(self, workspace_id: WorkspaceId, body: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The hits of one search, or None when the workspace does not exist."""
        async with self._guard("search"):
            try:
                response = await self.es.search(index=self._alias(workspace_id), **body)
            except ApiError as exc:
                if _missing(exc):
                    return None
                raise
        hits: list[dict[str, Any]] = response.body["hits"]["hits"]
        return hits

    async def _scan(self, workspace_id: WorkspaceId, native: EsFilter, *, with_vectors: bool) -> list[VectorNode]:
        """Every matching document in listing order. One page is one search; a longer listing pages with
        `search_after` through a point in time, so it reads one consistent snapshot however writes go meanwhile."""
        body: dict[str, Any] = {
            "query": native.query(),
            "sort": [{"seq": "asc"}, {"unique_id": "asc"}],
            "size": self.list_page_size,
            "_source": SOURCE_WITH_VECTORS if with_vectors else SOURCE_WITHOUT_VECTORS,
            "track_total_hits": False,
        }
        first = await self._search(workspace_id, body) or []
        if len(first) < self.list_page_size:
            return [_node(hit, workspace_id, with_vectors=with_vectors) for hit in first]
        async with self._guard("open point in time"):
            try:
                pit = (await self.es.open_point_in_time(index=self._alias(workspace_id), keep_alive="1m"))["id"]
            except ApiError as exc:
                if _missing(exc):
                    return []
                raise
        nodes: list[VectorNode] = []
        try:
            while True:
                body["pit"] = {"id": pit, "keep_alive": "1m"}
                async with self._guard("search"):
                    response = await self.es.search(**body)
                pit = response.body.get("pit_id", pit)
                hits = response.body["hits"]["hits"]
                nodes.extend(_node(hit, workspace_id, with_vectors=with_vectors) for hit in hits)
                if len(hits) < self.list_page_size:
                    return nodes
                body["search_after"] = hits[-1]["sort"]
        finally:
            try:
                async with self._guard("close point in time"):
                    await self.es.close_point_in_time(id=pit)
            except StoreError:  # it expires by itself
                logger.warning("could not close a point in time on %s", self._alias(workspace_id))

    async def _search_native(
        self, workspace_id: WorkspaceId, query: NDArray[np.float32], top_k: int, native: EsFilter
    ) -> list[SearchHit]:
        num_candidates = min(MAX_KNN, max(self.params.num_candidates, 2 * top_k))
        body = knn_body(query.tolist(), top_k, native, num_candidates=num_candidates, source=SOURCE_WITHOUT_VECTORS)
        hits = await self._search(workspace_id, body) or []
        return [
            SearchHit.model_construct(
                node=_node(hit, workspace_id, with_vectors=False), score=cosine_from_score(hit["_score"])
            )
            for hit in hits
        ]

    async def search(
        self, workspace_id: str, query: str, *, top_k: int, filter: Filter | None = None, exact: bool = False
    ) -> list[SearchHit]:
        """Vector search on the embedded query; with `hybrid`, fused with a BM25 match on the content (reciprocal
        rank fusion; the score is the fused score scaled so that first in both rankings is 1.0)."""
        workspace_id = validate_workspace_id(workspace_id)
        return await self._search_text(workspace_id, query, None, top_k=top_k, filter=filter, exact=exact)

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
        """`search` (its fusion is reciprocal rank fusion, so `lexical_weight` is not used), on `vector` when given
        (the query embedded already)."""
        workspace_id = validate_workspace_id(workspace_id)
        return await self._search_text(workspace_id, query, vector, top_k=top_k, filter=filter, exact=exact)

    async def _search_text(
        self,
        workspace_id: WorkspaceId,
        query: str,
        embedded: QueryVector | None,
        *,
        top_k: int,
        filter: Filter | None,
        exact: bool,
    ) -> list[SearchHit]:
        async def by_vector(exact: bool) -> list[SearchHit]:
            if embedded is None:
                return await super(ElasticsearchVectorStore, self).search(
                    workspace_id, query, top_k=top_k, filter=filter, exact=exact
                )
            return await self.search_vector(workspace_id, embedded, top_k=top_k, filter=filter, exact=exact)

        if not self.hybrid or exact:  # exact: every matching node ranked by cosine (no BM25 fusion)
            return await by_vector(exact)
        plan, flt = self._plan(filter, workspace_id)
        if top_k <= 0 or plan.impossible or flt.impossible or not flt.exact:
            if top_k > 0 and not plan.impossible and not flt.impossible:
                return await by_vector(False)
            return []
        dims = await self._dims_of(workspace_id)
        if dims is None:
            return []
        if embedded is None:
            embedded = (await self.embedder.embed([query]))[0]
        vector = as_query(embedded, workspace_id, dims)
        window = min(MAX_KNN, max(top_k, self.params.rrf_window))
        num_candidates = min(MAX_KNN, max(self.params.num_candidates, 2 * window))
        knn = knn_body(vector.tolist(), window, flt, num_candidates=num_candidates, source=SOURCE_WITHOUT_VECTORS)
        lexical = bm25_body(query, window, flt, SOURCE_WITHOUT_VECTORS)
        knn_hits, bm25_hits = await asyncio.gather(self._search(workspace_id, knn), self._search(workspace_id, lexical))
        nodes: dict[str, VectorNode] = {}
        rankings = []
        for hits in (knn_hits or [], bm25_hits or []):
            ranking = []
            for hit in hits:
                node = _node(hit, workspace_id, with_vectors=False)
                if plan.predicate is None or plan.predicate(node):
                    nodes.setdefault(node.unique_id, node)
                    ranking.append(node.unique_id)
            rankings.append(ranking)
        fused = reciprocal_rank_fusion(rankings)[:top_k]
        return [SearchHit.model_construct(node=nodes[uid], score=score) for uid, score in fused]
