"""An Elasticsearch-protocol test server: exactly the REST calls `ElasticsearchVectorStore` makes, with
Elasticsearch's semantics, so the real `elasticsearch` client talks to it unchanged.

```python
fake = FakeElasticsearch()
with serve_in_thread(fake.app) as url:
    store = ElasticsearchVectorStore(ElasticsearchStoreParams(hosts=[url]), embedder=...)
```

Implemented: `GET/HEAD /` (info, product header); index create (`PUT /{index}` with settings, mappings and aliases;
name rules; already-exists), exists (`HEAD`), get (`GET /{target}`, wildcards), delete (concrete names only),
`GET /{target}/_mapping`, `PUT /{target}/_mapping` (`_meta` only); `GET /_alias/{name}` and atomic `POST /_aliases`
(add, remove, remove_index);
`POST /_bulk` (index, create and delete actions, per-item results and errors, `require_alias`, `refresh`,
`if_seq_no` / `if_primary_term` conditions; documents are
checked against a strict mapping: unknown fields, dense_vector dimensions and zero vectors under cosine, field
types); `POST /{target}/_refresh`; realtime `POST /{target}/_mget`; and `POST /{target}/_search` with `query`
(`match_all`, `bool` with filter/must/should/must_not/minimum_should_match, `term`, `terms`, `range`, `ids`,
`exists`, `nested`, `match` scored with BM25), top-level `knn` (k, num_candidates, filter as a pre-filter;
cosine scored `(1 + cos) / 2`), `size`/`from` within the 10,000 result window, `sort` and `search_after`,
`_source` filtering; point in time (`POST /{target}/_pit`, searches with `pit`, `DELETE /_pit`) over a frozen copy.
Searches see documents as of the last refresh, as in Elasticsearch; `_mget` sees the latest.

Where Elasticsearch approximates (HNSW kNN), this server is exact. Not implemented calls answer 400 with
`unsupported_by_test_server`, so a store change that needs more fails loudly.
"""

from __future__ import annotations

import base64
import fnmatch
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes.es_search import (
    MAX_RESULT_WINDOW,
    EsError,
    Index,
    as_list,
    check_object,
    filter_source,
    sort_key,
    sort_order,
    sort_value,
    split,
    truthy,
)

_INVALID_NAME = re.compile(r'[\\/*?"<>| ,#:A-Z]')
_COMPAT = "application/vnd.elasticsearch+json;compatible-with=9"


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status, media_type=_COMPAT, headers={"X-Elastic-Product": "Elasticsearch"})


class FakeElasticsearch:
    """The test server's state and its Starlette `app`. `requests` logs `(method, path)` of every call."""

    def __init__(self) -> None:
        self.indices: dict[str, Index] = {}
        self.aliases: dict[str, set[str]] = {}  # alias -> concrete indices
        self.requests: list[tuple[str, str]] = []
        self.pits: dict[str, dict[str, Index]] = {}  # point in time id -> frozen copies of the indices
        self.app = Starlette(
            routes=[
                Route("/", self._root, methods=["GET", "HEAD"]),
                Route("/_bulk", self._bulk, methods=["POST", "PUT"]),
                Route("/_aliases", self._update_aliases, methods=["POST"]),
                Route("/_alias/{name}", self._get_alias, methods=["GET", "HEAD"]),
                Route("/_search", self._search, methods=["GET", "POST"]),
                Route("/_pit", self._close_pit, methods=["DELETE"]),
                Route("/{target}/_pit", self._open_pit, methods=["POST"]),
                Route("/{target}/_bulk", self._bulk, methods=["POST", "PUT"]),
                Route("/{target}/_mapping", self._get_mapping, methods=["GET"]),
                Route("/{target}/_mapping", self._put_mapping, methods=["PUT", "POST"]),
                Route("/{target}/_search", self._search, methods=["GET", "POST"]),
                Route("/{target}/_refresh", self._refresh, methods=["GET", "POST"]),
                Route("/{target}/_mget", self._mget, methods=["GET", "POST"]),
                Route("/{target}/{rest:path}", self._unsupported, methods=["GET", "POST", "PUT", "DELETE"]),
                Route("/{target}", self._index, methods=["GET", "HEAD", "PUT", "DELETE"]),
            ]
        )

    # ----- helpers -----

    def index_names(self) -> list[str]:
        return sorted(self.indices)

    def _resolve(self, target: str, *, allow_missing_wildcards: bool = True) -> list[str]:
        """Concrete index names for a comma-separated target of names, aliases and wildcards."""
        names: list[str] = []
        for part in target.split(","):
            if "*" in part:
                matched = [n for n in self.indices if fnmatch.fnmatchcase(n, part)]
                matched += [i for a, idx in self.aliases.items() if fnmatch.fnmatchcase(a, part) for i in idx]
                if not matched and not allow_missing_wildcards:
                    raise EsError(404, "index_not_found_exception", f"no such index [{part}]")
                names.extend(matched)
            elif part in self.indices:
                names.append(part)
            elif part in self.aliases:
                names.extend(sorted(self.aliases[part]))
            else:
                raise EsError(404, "index_not_found_exception", f"no such index [{part}]")
        return sorted(dict.fromkeys(names))

    def _write_index(self, target: str, require_alias: bool) -> Index:
        if target in self.aliases:
            indices = self.aliases[target]
            if len(indices) != 1:
                raise EsError(400, "illegal_argument_exception", f"no write index is defined for alias [{target}]")
            return self.indices[next(iter(indices))]
        if require_alias:
            raise EsError(
                404,
                "index_not_found_exception",
                f"no such index [{target}] and [require_alias] request flag is [true] and [{target}] is not an alias",
            )
        if target not in self.indices:  # Elasticsearch auto-creates the index, with a dynamic mapping
            self._check_name(target)
            self.indices[target] = Index(target, {"dynamic": "true"}, {})
        return self.indices[target]

    def _check_name(self, name: str) -> None:
        if (
            not name
            or _INVALID_NAME.search(name)
            or name[0] in "-_+"
            or name in (".", "..")
            or len(name.encode()) > 255
        ):
            raise EsError(400, "invalid_index_name_exception", f"Invalid index name [{name}]")

    async def _body(self, request: Request) -> Any:
        raw = await request.body()
        return orjson.loads(raw) if raw.strip() else {}

    async def _dispatch(self, request: Request, handler: Any) -> Response:
        self.requests.append((request.method, request.url.path))
        try:
            body, status = await handler(request)
        except EsError as exc:
            return _json(exc.body(), exc.status)
        if request.method == "HEAD":
            return Response(b"", status, headers={"X-Elastic-Product": "Elasticsearch"})
        return _json(body, status)

    # ----- routes -----

    async def _root(self, request: Request) -> Response:
        async def handle(_: Request) -> tuple[Any, int]:
            info = {
                "name": "reme-test-node",
                "cluster_name": "reme-test",
                "version": {"number": "9.1.0", "build_flavor": "default", "lucene_version": "10.2.2"},
                "tagline": "You Know, for Search",
            }
            return info, 200

        return await self._dispatch(request, handle)

    async def _unsupported(self, request: Request) -> Response:
        async def handle(_: Request) -> tuple[Any, int]:
            raise EsError(400, "unsupported_by_test_server", f"{request.method} {request.url.path} is not implemented")

        return await self._dispatch(request, handle)

    async def _index(self, request: Request) -> Response:
        target = request.path_params["target"]

        async def handle(_: Request) -> tuple[Any, int]:
            if request.method == "HEAD":
                try:
                    return None, 200 if self._resolve(target, allow_missing_wildcards=False) else 404
                except EsError:
                    return None, 404
            if request.method == "PUT":
                return self._create(target, await self._body(request))
            if request.method == "DELETE":
                return self._delete(target)
            return {name: self._describe(name) for name in self._resolve(target)}, 200

        return await self._dispatch(request, handle)

    def _describe(self, name: str) -> dict[str, Any]:
        index = self.indices[name]
        aliases: dict[str, dict[str, Any]] = {alias: {} for alias, members in self.aliases.items() if name in members}
        return {"aliases": aliases, "mappings": index.mappings, "settings": {"index": index.settings}}

    def _create(self, name: str, body: dict[str, Any]) -> tuple[Any, int]:
        self._check_name(name)
        if name in self.indices:
            raise EsError(400, "resource_already_exists_exception", f"index [{name}/uuid] already exists")
        if name in self.aliases:
            raise EsError(400, "invalid_index_name_exception", f"Invalid index name [{name}], already exists as alias")
        aliases = body.get("aliases") or {}
        for alias in aliases:
            if alias in self.indices:
                raise EsError(400, "invalid_alias_name_exception", f"Invalid alias name [{alias}]: an index exists")
        mappings = body.get("mappings") or {}
        for key, spec in mappings.get("properties", {}).items():
            if spec.get("type") == "dense_vector":
                if spec.get("similarity", "cosine") not in ("cosine", "dot_product", "l2_norm", "max_inner_product"):
                    raise EsError(400, "mapper_parsing_exception", f"unknown similarity for [{key}]")
                if not 1 <= int(spec.get("dims", 1)) <= 4096:
                    raise EsError(400, "mapper_parsing_exception", f"dims of [{key}] must be in [1, 4096]")
        settings = dict(body.get("settings") or {})
        self.indices[name] = Index(name, mappings, settings)
        for alias in aliases:
            self.aliases.setdefault(alias, set()).add(name)
        return {"acknowledged": True, "shards_acknowledged": True, "index": name}, 200

    def _delete(self, target: str) -> tuple[Any, int]:
        for part in target.split(","):
            if "*" in part:
                raise EsError(400, "illegal_argument_exception", "Wildcard expressions or all indices are not allowed")
            if part in self.aliases:
                raise EsError(
                    400,
                    "illegal_argument_exception",
                    f"The provided expression [{part}] matches an alias, specify the corresponding concrete indices "
                    "instead.",
                )
            if part not in self.indices:
                raise EsError(404, "index_not_found_exception", f"no such index [{part}]")
        for part in target.split(","):
            self._drop(part)
        return {"acknowledged": True}, 200

    def _drop(self, name: str) -> None:
        self.indices.pop(name, None)
        for alias in list(self.aliases):
            self.aliases[alias].discard(name)
            if not self.aliases[alias]:
                del self.aliases[alias]

    async def _get_mapping(self, request: Request) -> Response:
        async def handle(_: Request) -> tuple[Any, int]:
            names = self._resolve(request.path_params["target"])
            return {name: {"mappings": self.indices[name].mappings} for name in names}, 200

        return await self._dispatch(request, handle)

    async def _put_mapping(self, request: Request) -> Response:
        """Only a new `_meta`, which replaces the old one whole (as in Elasticsearch)."""

        async def handle(_: Request) -> tuple[Any, int]:
            body = await self._body(request)
            if set(body) != {"_meta"}:
                raise EsError(400, "unsupported_by_test_server", "a mapping update other than _meta")
            for name in self._resolve(request.path_params["target"]):
                self.indices[name].mappings["_meta"] = body["_meta"]
            return {"acknowledged": True}, 200

        return await self._dispatch(request, handle)

    async def _get_alias(self, request: Request) -> Response:
        name = request.path_params["name"]

        async def handle(_: Request) -> tuple[Any, int]:
            matched = {a: idx for a, idx in self.aliases.items() if fnmatch.fnmatchcase(a, name)}
            if not matched:
                return {"error": f"alias [{name}] missing", "status": 404}, 404
            out: dict[str, Any] = {}
            for alias, indices in matched.items():
                for index in indices:
                    out.setdefault(index, {"aliases": {}})["aliases"][alias] = {}
            return out, 200

        return await self._dispatch(request, handle)

    async def _update_aliases(self, request: Request) -> Response:
        async def handle(_: Request) -> tuple[Any, int]:
            actions = (await self._body(request)).get("actions", [])
            aliases = {alias: set(members) for alias, members in self.aliases.items()}
            drop: list[str] = []
            for action in actions:  # all checked first: the call applies completely or not at all
                ((kind, spec),) = action.items()
                index = spec.get("index")
                if index not in self.indices or index in drop:
                    raise EsError(404, "index_not_found_exception", f"no such index [{index}]")
                if kind == "add":
                    if spec["alias"] in self.indices:
                        raise EsError(400, "invalid_alias_name_exception", f"Invalid alias name [{spec['alias']}]")
                    aliases.setdefault(spec["alias"], set()).add(index)
                elif kind == "remove":
                    if index not in aliases.get(spec["alias"], set()):
                        raise EsError(404, "aliases_not_found_exception", f"aliases [{spec['alias']}] missing")
                    aliases[spec["alias"]].discard(index)
                elif kind == "remove_index":
                    drop.append(index)
                else:
                    raise EsError(400, "unsupported_by_test_server", f"alias action [{kind}]")
            for index in drop:
                for members in aliases.values():
                    members.discard(index)
                self.indices.pop(index)
            self.aliases = {alias: members for alias, members in aliases.items() if members}
            return {"acknowledged": True, "errors": False}, 200

        return await self._dispatch(request, handle)

    async def _refresh(self, request: Request) -> Response:
        async def handle(_: Request) -> tuple[Any, int]:
            names = self._resolve(request.path_params["target"])
            for name in names:
                self.indices[name].refresh()
            return {"_shards": {"total": len(names), "successful": len(names), "failed": 0}}, 200

        return await self._dispatch(request, handle)

    async def _bulk(self, request: Request) -> Response:
        async def handle(_: Request) -> tuple[Any, int]:
            lines = [line for line in (await request.body()).split(b"\n") if line.strip()]
            default = request.path_params.get("target")
            require_alias = truthy(request.query_params.get("require_alias", "false"))
            items: list[dict[str, Any]] = []
            touched: set[str] = set()
            i = 0
            while i < len(lines):
                action = orjson.loads(lines[i])
                ((kind, meta),) = action.items()
                source = None
                if kind in ("index", "create"):
                    source = orjson.loads(lines[i + 1])
                    i += 2
                elif kind == "delete":
                    i += 1
                else:
                    raise EsError(400, "unsupported_by_test_server", f"bulk action [{kind}]")
                items.append({kind: self._bulk_item(kind, meta, source, default, require_alias, touched)})
            if truthy(request.query_params.get("refresh", "false")):
                for name in touched:
                    if name in self.indices:
                        self.indices[name].refresh()
            errors = any("error" in next(iter(item.values())) for item in items)
            return {"took": 1, "errors": errors, "items": items}, 200

        return await self._dispatch(request, handle)

    def _bulk_item(
        self, kind: str, meta: dict[str, Any], source: Any, default: str | None, require_alias: bool, touched: set[str]
    ) -> dict[str, Any]:
        target, doc_id = meta.get("_index", default), str(meta.get("_id"))
        try:
            if target is None:
                raise EsError(400, "action_request_validation_exception", "index is missing")
            index = self._write_index(target, require_alias) if kind != "delete" or target in self.aliases else None
            if index is None:
                if target not in self.indices:
                    if require_alias:
                        self._write_index(target, True)
                    raise EsError(404, "index_not_found_exception", f"no such index [{target}]")
                index = self.indices[target]
            touched.add(index.name)
            _check_version(index, doc_id, meta)
            index.seq_no += 1
            base = {"_index": index.name, "_id": doc_id, "_primary_term": 1, "_seq_no": index.seq_no}
            if kind == "delete":
                found = index.docs.pop(doc_id, None) is not None
                index.doc_seq.pop(doc_id, None)
                index.versions[doc_id] += 1
                result = {"result": "deleted" if found else "not_found", "status": 200 if found else 404}
                return {**base, "_version": index.versions[doc_id], **result}
            if not isinstance(source, dict):
                raise EsError(400, "document_parsing_exception", "the document is not an object")
            if kind == "create" and doc_id in index.docs:
                raise EsError(409, "version_conflict_engine_exception", f"[{doc_id}]: document already exists")
            check_object(index.props(), source, index.mappings.get("dynamic", "true"), doc_id, "_doc")
            existed = doc_id in index.docs
            index.docs[doc_id] = source
            index.doc_seq[doc_id] = index.seq_no
            index.versions[doc_id] += 1
            result = {"result": "updated" if existed else "created", "status": 200 if existed else 201}
            return {**base, "_version": index.versions[doc_id], **result}
        except EsError as exc:
            return {
                "_index": target,
                "_id": doc_id,
                "status": exc.status,
                "error": {"type": exc.type, "reason": exc.reason},
            }

    async def _mget(self, request: Request) -> Response:
        async def handle(_: Request) -> tuple[Any, int]:
            body = await self._body(request)
            target = request.path_params["target"]
            ids = [str(i) for i in body.get("ids") or [d["_id"] for d in body.get("docs", [])]]
            includes = split(request.query_params.get("_source_includes"))
            excludes = split(request.query_params.get("_source_excludes"))
            try:
                names = self._resolve(target)
                if len(names) != 1:
                    raise EsError(400, "illegal_argument_exception", f"alias [{target}] has more than one index")
                index = self.indices[names[0]]
            except EsError as exc:
                error = {"type": exc.type, "reason": exc.reason}
                return {"docs": [{"_index": target, "_id": i, "error": error} for i in ids]}, 200
            docs = []
            for doc_id in ids:
                source = index.docs.get(doc_id)
                if source is None:
                    docs.append({"_index": index.name, "_id": doc_id, "found": False})
                else:
                    filtered = filter_source(source, None, includes, excludes)
                    docs.append(
                        {
                            "_index": index.name,
                            "_id": doc_id,
                            "_version": index.versions[doc_id],
                            "_seq_no": index.doc_seq[doc_id],
                            "_primary_term": 1,
                            "found": True,
                            "_source": filtered,
                        }
                    )
            return {"docs": docs}, 200

        return await self._dispatch(request, handle)

    async def _open_pit(self, request: Request) -> Response:
        async def handle(_: Request) -> tuple[Any, int]:
            if not request.query_params.get("keep_alive"):
                raise EsError(400, "action_request_validation_exception", "[keep_alive] is missing")
            names = self._resolve(request.path_params["target"])
            frozen = {}
            for name in names:
                index = self.indices[name]
                frozen[name] = Index(name, index.mappings, index.settings, visible=dict(index.visible))
            pit_id = base64.urlsafe_b64encode(os.urandom(24)).decode()
            self.pits[pit_id] = frozen
            return {"id": pit_id}, 200

        return await self._dispatch(request, handle)

    async def _close_pit(self, request: Request) -> Response:
        async def handle(_: Request) -> tuple[Any, int]:
            pit_id = (await self._body(request)).get("id")
            found = self.pits.pop(pit_id, None) is not None
            return {"succeeded": found, "num_freed": 1 if found else 0}, 200 if found else 404

        return await self._dispatch(request, handle)

    async def _search(self, request: Request) -> Response:
        async def handle(_: Request) -> tuple[Any, int]:
            body = await self._body(request)
            target = request.path_params.get("target")
            pit = body.get("pit")
            if pit is not None:
                if target is not None:
                    raise EsError(
                        400, "action_request_validation_exception", "[indices] cannot be used with point in time"
                    )
                frozen = self.pits.get(pit.get("id"))
                if frozen is None:
                    raise EsError(404, "search_context_missing_exception", "No search context found for id")
                result = self._run_search(sorted(frozen), body, frozen)
                result["pit_id"] = pit["id"]
                return result, 200
            if target is None:
                raise EsError(400, "unsupported_by_test_server", "searching every index is not implemented")
            return self._run_search(self._resolve(target), body), 200

        return await self._dispatch(request, handle)

    def _run_search(
        self, names: list[str], body: dict[str, Any], indices: dict[str, Index] | None = None
    ) -> dict[str, Any]:
        size, offset = int(body.get("size", 10)), int(body.get("from", 0))
        if size + offset > MAX_RESULT_WINDOW:
            raise EsError(
                400,
                "illegal_argument_exception",
                f"Result window is too large, from + size must be less than or equal to: [{MAX_RESULT_WINDOW}] but "
                f"was [{size + offset}]. See the scroll api for a more efficient way to request large data sets.",
            )
        scored: list[tuple[float, str, str, dict[str, Any]]] = []  # (score, index, id, source)
        for name in names:
            index = (indices or self.indices)[name]
            knn = body.get("knn")
            query = body.get("query")
            if knn is None:
                matched = index.matching(query or {"match_all": {}})
            else:
                knn_scores = self._knn(index, knn)
                extra = dict(index.matching(query)) if query is not None else None
                matched = [
                    (doc_id, score + (extra[doc_id] if extra is not None else 0.0))
                    for doc_id, score in knn_scores.items()
                    if extra is None or doc_id in extra
                ]
            scored.extend((score, name, doc_id, index.visible[doc_id]) for doc_id, score in matched)
        sort = body.get("sort")
        if sort:
            keys = [sort_key(spec) for spec in as_list(sort)]
            rows = [(tuple(sort_value(src, f) for f, _ in keys), s, n, i, src) for s, n, i, src in scored]
            rows.sort(key=lambda row: sort_order(row[0], keys))
            after = body.get("search_after")
            if after is not None:
                bound = sort_order(tuple(after), keys)
                rows = [row for row in rows if sort_order(row[0], keys) > bound]
            page = rows[offset : offset + size]
            hits = [self._hit(n, i, src, body, None, list(values)) for values, _, n, i, src in page]
        else:
            scored.sort(key=lambda row: (-row[0], row[1], row[2]))
            ranked = scored[offset : offset + size]
            hits = [self._hit(n, i, src, body, s, None) for s, n, i, src in ranked]
        total = {"value": len(scored), "relation": "eq"}
        top = max((row[0] for row in scored), default=None) if not sort else None
        return {
            "took": 1,
            "timed_out": False,
            "_shards": {"total": len(names), "successful": len(names), "skipped": 0, "failed": 0},
            "hits": {"total": total, "max_score": top, "hits": hits},
        }

    def _knn(self, index: Index, knn: dict[str, Any]) -> dict[str, float]:
        field_name, k = knn["field"], int(knn.get("k", 10))
        candidates = int(knn.get("num_candidates", min(int(1.5 * k), MAX_RESULT_WINDOW)))
        if not 1 <= k <= candidates or candidates > MAX_RESULT_WINDOW:
            raise EsError(
                400, "illegal_argument_exception", f"[num_candidates] must be in [k, 10000], got {candidates}"
            )
        spec = index.props().get(field_name, {})
        if spec.get("type") != "dense_vector":
            raise EsError(400, "illegal_argument_exception", f"field [{field_name}] is not a dense_vector")
        query = np.asarray(knn["query_vector"], dtype=np.float32)
        if spec.get("dims") is not None and len(query) != spec["dims"]:
            raise EsError(
                400,
                "illegal_argument_exception",
                f"The query vector has a different number of dimensions [{len(query)}] than the document vectors "
                f"[{spec['dims']}].",
            )
        qnorm = float(np.linalg.norm(query))
        if spec.get("similarity") == "cosine" and qnorm == 0:
            raise EsError(
                400,
                "illegal_argument_exception",
                "The [cosine] similarity does not support vectors with zero magnitude.",
            )
        allowed = {doc_id for doc_id, _ in index.matching({"bool": {"filter": as_list(knn.get("filter"))}})}
        ids, rows = [], []
        for doc_id, source in index.visible.items():
            vector = source.get(field_name)
            if isinstance(vector, list) and doc_id in allowed:
                ids.append(doc_id)
                rows.append(vector)
        if not ids:
            return {}
        matrix = np.asarray(rows, dtype=np.float32)
        cosines = (matrix @ query) / (np.linalg.norm(matrix, axis=1) * qnorm)
        scores = sorted(zip(((1.0 + cosines) / 2.0).tolist(), ids, strict=True), key=lambda row: (-row[0], row[1]))
        return {doc_id: score for score, doc_id in scores[:k]}

    def _hit(
        self, name: str, doc_id: str, source: dict[str, Any], body: dict[str, Any], score: float | None, sort: Any
    ) -> dict[str, Any]:
        hit: dict[str, Any] = {"_index": name, "_id": doc_id, "_score": score}
        filtered = filter_source(source, body.get("_source", True), [], [])
        if filtered is not None:
            hit["_source"] = filtered
        if sort is not None:
            hit["sort"] = sort
        return hit


def _check_version(index: Index, doc_id: str, meta: dict[str, Any]) -> None:
    """Optimistic concurrency: `if_seq_no` / `if_primary_term` must name the document's current version."""
    if "if_seq_no" not in meta and "if_primary_term" not in meta:
        return
    current = index.doc_seq.get(doc_id)
    wanted, term = meta.get("if_seq_no"), meta.get("if_primary_term")
    if current is None or current != wanted or term != 1:
        found = "no document was found" if current is None else f"current document has seqNo [{current}]"
        raise EsError(
            409,
            "version_conflict_engine_exception",
            f"[{doc_id}]: version conflict, required seqNo [{wanted}], primary term [{term}]. but {found}",
        )


@contextmanager
def serve_at(app: Any, port: int, *, timeout: float = 10.0) -> Iterator[str]:
    """Serve `app` on a given loopback port (for a server that comes up after its client started), like
    `reme_service.testing.serve.serve_in_thread` otherwise."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name=f"serve-at-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(timeout)
            raise RuntimeError(f"the test server did not start on port {port}")
        time.sleep(0.005)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
