"""The longest query the retrieval ops read: a longer one is cut, and the answer says so.

Every step after the query is decided costs time per character on the event loop or in the providers: BM25
tokenises and stems it (~1.5 µs a character), the time rules read it, an OpenAI-compatible embedder refuses inputs
past ~8k tokens, and the local model reads only its first 256 tokens anyway. A 9 MB query held the event loop for
several seconds. Cut to `MAX_QUERY_CHARS` characters, the costliest query is bounded (a few ms) and still far
longer than any search needs.
"""

from __future__ import annotations

from reme_service.ops.common.context import ServiceContext

MAX_QUERY_CHARS = 20_000


def limited_query(ctx: ServiceContext, query: str) -> str:
    """`query` cut to `MAX_QUERY_CHARS` characters; when it was longer, `metadata.warning` says so."""
    if len(query) <= MAX_QUERY_CHARS:
        return query
    ctx.response.metadata["warning"] = (
        f"the query was {len(query)} characters long; only its first {MAX_QUERY_CHARS} were searched"
    )
    return query[:MAX_QUERY_CHARS]
