"""Hybrid retrieval on PostgreSQL: the query's nearest vectors and its best full-text matches, fused.

Each row keeps `lex`, a `tsvector` of the same index terms the in-process stores' BM25 uses (`lexical.tokenize`:
lower-cased words without stopwords or plural "s", CJK bigrams), under a GIN index. A hybrid search takes the
`candidates` nearest rows by vector (HNSW when unfiltered) and the `candidates` best by `ts_rank` over the query's
terms OR-ed together, then ranks their union by `lexical.fuse` — `(1 - w) * cosine + w * rank / max(rank)`, the
formula of the in-process stores — with ties by listing order. Filters apply to both candidate lists, in SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import sql

from reme_service.stores.lexical import fuse, tokenize

CANDIDATES_PER_HIT = 10
MIN_CANDIDATES = 50


def lex_text(content: str) -> str:
    """What a row's `lex` column is made from: its index terms, space-separated."""
    return " ".join(tokenize(content))


def query_terms(text: str) -> str:
    """A `to_tsquery` string matching any of the query's index terms ('' when it has none)."""
    return " | ".join(dict.fromkeys(tokenize(text)))


def candidate_count(top_k: int) -> int:
    return max(top_k * CANDIDATES_PER_HIT, MIN_CANDIDATES)


def hybrid_statement(table: sql.Identifier, where: sql.Composable | None) -> sql.Composed:
    """Parameters: `q` (vector text), `tq` (query terms), `k` (candidates per list), and the filter's own."""
    condition = where or sql.SQL("TRUE")
    return sql.SQL(
        "WITH v AS (SELECT id FROM {t} WHERE {w} ORDER BY embedding <#> %(q)s::vector LIMIT %(k)s), "
        "l AS (SELECT id FROM {t} WHERE ({w}) AND lex @@ to_tsquery('simple', %(tq)s) "
        "ORDER BY ts_rank(lex, to_tsquery('simple', %(tq)s)) DESC LIMIT %(k)s), "
        "c AS (SELECT id FROM v UNION SELECT id FROM l) "
        "SELECT t.id, t.content, t.metadata::text, -(t.embedding <#> %(q)s::vector), "
        "ts_rank(t.lex, to_tsquery('simple', %(tq)s)), t.seq FROM c JOIN {t} t ON t.id = c.id"
    ).format(t=table, w=condition)


def fused_order(rows: Sequence[Sequence[Any]], weight: float, top_k: int) -> list[tuple[Sequence[Any], float]]:
    """The best `top_k` candidate rows `(id, content, metadata, cosine, rank, seq)` with their fused scores."""
    if not rows:
        return []
    cosine = np.array([float(row[3]) for row in rows], np.float32)
    lexical = np.array([float(row[4]) for row in rows], np.float32)
    scores = fuse(cosine, lexical, weight)
    order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), int(rows[i][5])))
    return [(rows[i], min(max(float(scores[i]), 0.0), 1.0)) for i in order[:top_k]]
