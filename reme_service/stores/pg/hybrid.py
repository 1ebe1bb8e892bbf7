"""Hybrid retrieval on PostgreSQL: the query's nearest vectors and its best full-text matches, fused.

Each row keeps `lex`, a `tsvector` of the same index terms the in-process stores' BM25 uses (`lexical.tokenize`:
lower-cased words without stopwords or plural "s", CJK bigrams), under a GIN index. A hybrid search takes the
`candidates` nearest rows by vector (HNSW, with pgvector's iterative scan when filtered) and the `candidates` best
by `ts_rank` among the rows holding one of the query's *distinctive* terms — those in at most a tenth of the
table's rows (`pg/terms.py`; a term in most rows would make the full-text side rank most of the table). Their
union is ranked, in the same statement, by `lexical.fuse` — `(1 - w) * cosine + w * rank / max(rank)`, in single
precision as the in-process stores compute it, with `rank` the `ts_rank` of all the query's terms — ties by listing
order, and only the best `top_k` rows come back. Filters apply to both candidate lists, in SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from psycopg import sql

from reme_service.stores.lexical import tokenize

CANDIDATES_PER_HIT = 2
MIN_CANDIDATES = 50


def lex_text(content: str) -> str:
    """What a row's `lex` column is made from: its index terms, space-separated."""
    return " ".join(tokenize(content))


def query_terms(text: str) -> list[str]:
    """The query's distinct index terms, in order."""
    return list(dict.fromkeys(tokenize(text)))


def any_of(terms: Iterable[str]) -> str:
    """A `to_tsquery` string matching any of `terms` ('' for none)."""
    return " | ".join(terms)


def candidate_count(top_k: int) -> int:
    return max(top_k * CANDIDATES_PER_HIT, MIN_CANDIDATES)


@dataclass(frozen=True)
class HybridQuery:
    """The parameters of `hybrid_statement` besides the filter's: `vector` (pgvector text), `ranked` (all the
    query's terms, which rank), `searched` (the distinctive ones, which find full-text candidates; '' for none),
    `candidates` per list, `top_k` and the lexical `weight` (> 0)."""

    vector: str
    ranked: str
    searched: str
    candidates: int
    top_k: int
    weight: float

    def params(self) -> dict[str, object]:
        """The bound parameters (the counts are literals of the statement: `hybrid_statement`)."""
        return {"q": self.vector, "tq": self.ranked, "lq": self.searched, "w": self.weight}


def hybrid_statement(table: str, where: sql.Composable | None, spec: HybridQuery) -> sql.SQL | sql.Composed:
    """`hybrid_sql` for the query; without a filter (a retrieval's usual case) its text is composed once per table
    and row counts, not on every search."""
    if where is None:
        return _unfiltered(table, spec.candidates, spec.top_k, bool(spec.searched))
    return hybrid_sql(sql.Identifier(table), where, spec.candidates, spec.top_k, full_text=bool(spec.searched))


@lru_cache(maxsize=1024)
def _unfiltered(table: str, candidates: int, top_k: int, full_text: bool) -> sql.SQL:
    return sql.SQL(hybrid_sql(sql.Identifier(table), None, candidates, top_k, full_text=full_text).as_string(None))


def hybrid_sql(
    table: sql.Identifier, where: sql.Composable | None, candidates: int, top_k: int, *, full_text: bool
) -> sql.Composed:
    """The best `top_k` rows `(id, content, metadata, fused score, seq)`, best first, of `candidates` per list;
    without `full_text` (a query with no distinctive term) there are no full-text candidates. Each candidate list
    computes the cosine and the rank of the rows it reads (the row is at hand: no second visit of each candidate),
    the union drops the rows both found, and only the `top_k` fused best are read again for their content. The
    fused score is computed in `real` arithmetic step by step as numpy does it in float32, so both rank alike. The
    row counts are literals, not parameters: with them known, the plan PostgreSQL keeps for the prepared statement
    is the one it would make for each call (with `LIMIT $n` it falls back to a generic plan three times as costly),
    and planning is not paid on every call."""
    condition = where or sql.SQL("TRUE")
    k, n = sql.Literal(int(candidates)), sql.Literal(int(top_k))
    scored = sql.SQL("id, seq, (-(embedding <#> %(q)s::vector))::real AS cos, ts_rank(lex, (SELECT tq FROM qq)) AS r")
    nearest = sql.SQL("SELECT {s} FROM {t} WHERE {w} ORDER BY embedding <#> %(q)s::vector LIMIT {k}").format(
        s=scored, t=table, w=condition, k=k
    )
    matching = sql.SQL(
        "SELECT {s} FROM {t} WHERE ({w}) AND lex @@ (SELECT lq FROM qq) "
        "ORDER BY ts_rank(lex, (SELECT lq FROM qq)) DESC LIMIT {k}"
    ).format(s=scored, t=table, w=condition, k=k)
    union = sql.SQL("({}) UNION ({})").format(nearest, matching) if full_text else nearest
    return sql.SQL(
        # the queries parsed once (a function call in a row's expression would run for every row)
        "WITH qq AS (SELECT to_tsquery('simple', %(tq)s) AS tq, to_tsquery('simple', %(lq)s) AS lq), "
        "s AS ({c}), "
        "m AS (SELECT max(r) AS top FROM s), "
        "f AS (SELECT s.id, s.seq, CASE WHEN m.top > 0 THEN "
        "(1 - %(w)s::float8)::real * greatest(least(s.cos, 1::real), 0::real) + (%(w)s::float8 / m.top)::real * s.r "
        "ELSE s.cos END AS score FROM s, m ORDER BY score DESC, s.seq LIMIT {n}) "
        "SELECT t.id, t.content, t.metadata::text, f.score, f.seq FROM f JOIN {t} t ON t.id = f.id "
        "ORDER BY f.score DESC, f.seq"
    ).format(c=union, t=table, n=n)
