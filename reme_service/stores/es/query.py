"""Elasticsearch documents, mappings and queries for our nodes; reciprocal-rank fusion for hybrid search.

An index holds one workspace. A document:

```
{"unique_id": keyword, "workspace_id": keyword, "content": text (BM25),
 "metadata": object, not indexed (the lossless copy read back),
 "leaves": nested [{"p": path, "s"|"n"|"b"|"z": value}] (typed scalar leaves, see stores/remote_filter.py),
 "seq": long (listing position), "vector": dense_vector (cosine, HNSW over floats),
 "vector_b64": binary (the float32 vector, read back exactly; recent clusters leave vectors out of _source)}
```

A filter condition on `metadata.<path>` becomes a `nested` query on the leaf of that path and kind; `ne` / `nin`
are `must_not` of the positive query, which holds for a missing path as the grammar wants. Strings longer than
`KEYWORD_LIMIT` characters are not indexed (Lucene's term limit), so conditions that need them, string ranges,
`content` conditions and numbers beyond 2**53 are reported as inexact (the store then filters itself).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from reme_service.stores.filters import Condition
from reme_service.stores.remote_filter import (
    group_by_kind,
    is_exact_number,
    leaf_kind,
    metadata_path,
    scalar_leaves,
)
from reme_service.stores.vectors import QueryVector

KEYWORD_LIMIT = 8191  # characters; 4 bytes each stays under Lucene's 32766-byte term limit
META_WORKSPACE = "reme_workspace_id"
META_SPACE = "reme_embedding_space"  # the index's embedding space (`stores/spaces.py`), in `_meta` too
SOURCE_WITHOUT_VECTORS = {"excludes": ["vector", "vector_b64", "leaves"]}
SOURCE_WITH_VECTORS = {"excludes": ["vector", "leaves"]}
RRF_RANK_CONSTANT = 60


def index_meta(workspace_id: str, space: Mapping[str, Any] | None) -> dict[str, Any]:
    """An index's `_meta`: its workspace id and, once known, its embedding space."""
    return {META_WORKSPACE: workspace_id, **({META_SPACE: dict(space)} if space is not None else {})}


def index_body(
    workspace_id: str,
    dims: int,
    *,
    m: int = 16,
    ef_construction: int = 100,
    settings: Mapping[str, Any] | None = None,
    space: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """`settings` and `mappings` for a workspace index with vectors of `dims` dimensions (of `space`, when given)."""
    return {
        "settings": {"number_of_shards": 1, **(settings or {})},
        "mappings": {
            "dynamic": "strict",
            "_meta": index_meta(workspace_id, space),
            "properties": {
                "unique_id": {"type": "keyword"},
                "workspace_id": {"type": "keyword"},
                "content": {"type": "text"},
                "metadata": {"type": "object", "enabled": False},
                "leaves": {
                    "type": "nested",
                    "properties": {
                        "p": {"type": "keyword"},
                        "s": {"type": "keyword", "ignore_above": KEYWORD_LIMIT},
                        "n": {"type": "double"},
                        "b": {"type": "boolean"},
                        "z": {"type": "boolean"},
                    },
                },
                "seq": {"type": "long"},
                "vector": {
                    "type": "dense_vector",
                    "dims": dims,
                    "index": True,
                    "similarity": "cosine",
                    "index_options": {"type": "hnsw", "m": m, "ef_construction": ef_construction},
                },
                "vector_b64": {"type": "binary"},
            },
        },
    }


def mapping_dims(mappings: Mapping[str, Any]) -> int | None:
    """The `dims` of the vector field in an index's mappings, when set."""
    dims = mappings.get("properties", {}).get("vector", {}).get("dims")
    return int(dims) if isinstance(dims, int) else None


def encode_vector(vector: NDArray[np.float32]) -> str:
    return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(source: Mapping[str, Any]) -> NDArray[np.float32] | None:
    raw = source.get("vector_b64")
    if isinstance(raw, str):
        return np.frombuffer(base64.b64decode(raw), dtype="<f4").astype(np.float32)
    if isinstance(source.get("vector"), list):  # documents written by others
        return np.asarray(source["vector"], dtype=np.float32)
    return None


def document(
    unique_id: str, workspace_id: str, content: str, metadata: Mapping[str, Any], seq: int, vector: NDArray[np.float32]
) -> dict[str, Any]:
    leaves = [{"p": path, kind: value} for path, kind, value in scalar_leaves(metadata)]
    return {
        "unique_id": unique_id,
        "workspace_id": workspace_id,
        "content": content,
        "metadata": metadata,
        "leaves": leaves,
        "seq": seq,
        "vector": vector.tolist(),
        "vector_b64": encode_vector(vector),
    }


# ----- filters -----


@dataclass(slots=True)
class EsFilter:
    """Translated conditions: `filter` and `must_not` clauses of a bool query; `exact`; `impossible`."""

    filter: list[dict[str, Any]] = field(default_factory=list)
    must_not: list[dict[str, Any]] = field(default_factory=list)
    exact: bool = True
    impossible: bool = False

    def query(self) -> dict[str, Any]:
        """The bool query (match_all when there is no condition)."""
        if not self.filter and not self.must_not:
            return {"match_all": {}}
        body: dict[str, Any] = {}
        if self.filter:
            body["filter"] = self.filter
        if self.must_not:
            body["must_not"] = self.must_not
        return {"bool": body}


def _nested(path: str, clauses: list[dict[str, Any]]) -> dict[str, Any]:
    return {"nested": {"path": "leaves", "query": {"bool": {"filter": [{"term": {"leaves.p": path}}, *clauses]}}}}


def _values_clause(kind: str, values: list[Any]) -> dict[str, Any]:
    if kind == "z":
        return {"term": {"leaves.z": True}}
    if len(values) == 1:
        return {"term": {f"leaves.{kind}": values[0]}}
    return {"terms": {f"leaves.{kind}": values}}


def _fits(value: Any) -> bool:
    """Whether Elasticsearch indexes this operand exactly (short strings, float-safe numbers)."""
    if isinstance(value, str):
        return len(value) <= KEYWORD_LIMIT
    return is_exact_number(value) and leaf_kind(value) is not None


def _leaf_positive(path: str, values: Sequence[Any]) -> dict[str, Any] | None:
    """The query matching nodes whose leaf at `path` equals one of `values` (None: no value can match)."""
    groups = group_by_kind(tuple(values))
    if not groups:
        return None
    should = [_values_clause(kind, items) for kind, items in groups.items()]
    if len(should) == 1:
        return _nested(path, should)
    return _nested(path, [{"bool": {"should": should, "minimum_should_match": 1}}])


def _add_leaf(out: EsFilter, path: str, op: str, operand: Any) -> None:
    if op in ("eq", "in"):
        values = [operand] if op == "eq" else list(operand)
        if not all(_fits(v) for v in values):
            out.exact = False  # leaving the condition out only widens the match
            return
        query = _leaf_positive(path, values)
        if query is None:
            out.impossible = True
        else:
            out.filter.append(query)
    elif op in ("ne", "nin"):
        values = [operand] if op == "ne" else list(operand)
        kept = [v for v in values if _fits(v)]
        out.exact = out.exact and len(kept) == len(values)
        query = _leaf_positive(path, kept)
        if query is not None:
            out.must_not.append(query)
    elif isinstance(operand, str):
        out.exact = False  # long strings are not indexed, so a keyword range could miss them
    elif is_exact_number(operand):
        out.filter.append(_nested(path, [{"range": {"leaves.n": {op: float(operand)}}}]))
    else:
        loose = {"gt": "gte", "lt": "lte"}.get(op, op)
        out.filter.append(_nested(path, [{"range": {"leaves.n": {loose: float(operand)}}}]))
        out.exact = False


def _add_uid(out: EsFilter, op: str, operand: Any) -> None:
    if op in ("eq", "in", "ne", "nin"):
        values = [operand] if op in ("eq", "ne") else list(operand)
        strings = [v for v in values if isinstance(v, str)]
        if op in ("eq", "in"):
            if not strings:
                out.impossible = True
            else:
                out.filter.append({"terms": {"unique_id": strings}})
        elif strings:
            out.must_not.append({"terms": {"unique_id": strings}})
    elif isinstance(operand, str):
        out.filter.append({"range": {"unique_id": {op: operand}}})
    else:
        out.impossible = True  # ids are strings; strings never compare with numbers


def es_filter(conditions: Iterable[Condition]) -> EsFilter:
    """Translate planned conditions (see `plan_filter`) into bool-query clauses."""
    out = EsFilter()
    for condition in conditions:
        if condition.path == ("unique_id",):
            _add_uid(out, condition.op, condition.operand)
            continue
        path = metadata_path(condition)
        if path is None:  # `content` is analysed text, not a keyword
            out.exact = False
            continue
        _add_leaf(out, path, condition.op, condition.operand)
    return out


# ----- searches -----


def knn_body(
    vector: QueryVector, top_k: int, flt: EsFilter, *, num_candidates: int, source: Mapping[str, Any]
) -> dict[str, Any]:
    knn: dict[str, Any] = {
        "field": "vector",
        "query_vector": list(vector),
        "k": top_k,
        "num_candidates": max(num_candidates, top_k),
    }
    if flt.filter or flt.must_not:
        knn["filter"] = flt.query()
    return {"knn": knn, "size": top_k, "_source": dict(source)}


def bm25_body(text: str, size: int, flt: EsFilter, source: Mapping[str, Any]) -> dict[str, Any]:
    query: dict[str, Any] = {"bool": {"must": [{"match": {"content": text}}]}}
    if flt.filter:
        query["bool"]["filter"] = flt.filter
    if flt.must_not:
        query["bool"]["must_not"] = flt.must_not
    return {"query": query, "size": size, "_source": dict(source)}


def cosine_from_score(score: float) -> float:
    """Elasticsearch reports a cosine kNN hit as `(1 + cos) / 2`; our score is `max(cos, 0)`, at most 1."""
    return min(max(2.0 * float(score) - 1.0, 0.0), 1.0)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], *, rank_constant: int = RRF_RANK_CONSTANT
) -> list[tuple[str, float]]:
    """Fuse ranked id lists: `sum(1 / (rank_constant + rank))` over the lists an id is in (ranks from 1), scaled so
    that first place in every list scores 1.0. Ties keep first-seen order."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, uid in enumerate(ranking, start=1):
            fused[uid] = fused.get(uid, 0.0) + 1.0 / (rank_constant + rank)
    best = len(rankings) / (rank_constant + 1) if rankings else 1.0
    ordered = sorted(fused.items(), key=lambda item: -item[1])
    return [(uid, min(score / best, 1.0)) for uid, score in ordered]
