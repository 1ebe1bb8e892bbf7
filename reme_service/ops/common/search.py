"""`ranked_search`: the one way the retrieval ops ask a store for candidates, hybrid or by vector or by text."""

from __future__ import annotations

from reme_service.schema.vector_node import SearchHit
from reme_service.stores.base import Filter, VectorStore
from reme_service.stores.vectors import QueryVector


async def ranked_search(
    store: VectorStore,
    workspace_id: str,
    query: str,
    *,
    top_k: int,
    filter: Filter | None,
    exact: bool,
    vector: QueryVector | None = None,
    lexical_weight: float | None = None,
) -> list[SearchHit]:
    """The store's best `top_k` for `query`: cosine fused with BM25 when `lexical_weight` is given
    (`search_hybrid`), else by cosine alone. `vector` is the query's embedding when the op has it already (a
    flow searching more than once embeds its query once); without it the store embeds `query`."""
    if lexical_weight is not None:
        return await store.search_hybrid(
            workspace_id, query, top_k=top_k, filter=filter, lexical_weight=lexical_weight, exact=exact, vector=vector
        )
    if vector is not None:
        return await store.search_vector(workspace_id, vector, top_k=top_k, filter=filter, exact=exact)
    return await store.search(workspace_id, query, top_k=top_k, filter=filter, exact=exact)
