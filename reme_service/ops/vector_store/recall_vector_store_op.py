"""RecallVectorStoreOp: search the workspace for the query and turn the hits into memories.

With `hybrid` (the default) the store ranks by cosine similarity fused with a BM25 score over the same texts
(`VectorStore.search_hybrid`; `lexical_weight` is the BM25 share): on LoCoMo it lifts evidence hit@5 from 0.47
to 0.64 with the MiniLM embedder, and the rescoring below with neighbour-context memories to 0.75
(`cookbook/bench/locomo_recall.py`). Backends without a lexical index answer with plain vector search.
`hybrid=False` is ReMe's pure vector search.

Then the query's exact cues are checked in the candidates' `content` (`rescore.py`: the speaker a line is said
by, a time mention for a "when" question), and the candidates are scored by group too (`metadata[group_key]`,
e.g. a conversation's session: each candidate gets `group_weight` × its group's best score over the best group's,
a two-stage session → turn search); the best `rescore_pool` hits are re-ordered by search score plus those
bonuses, and the `top_k` returned are picked with `diversity` off a candidate per candidate of its group already
picked (a turn of another strong session before a third turn of the same one; `list_diversity` when the query asks
for a list, "What books has Melanie read?", whose answer is spread over sessions more often). A query naming a
period ("in July 2023", `periods.py`) is embedded here once and searched twice or three times: as it is and within
each period (a store filter on `time_created`); the memories written in the period get `period_boost` before the
pool is cut. The defaults were chosen by
leave-one-conversation-out cross-validation on LoCoMo (docs/retrieval_quality.md); all bonuses and the diversity
at 0 give the plain search order. The pool is 20 hits (the store builds a node for each: 50 ranked a little
better, +0.006 turn hit@5 in-sample, but made the rescoring cost +0.30 ms at p50 instead of +0.05 ms).

Each memory keeps its stored `score`; the search score goes into `relevance` (the bonuses do not). Candidates are
deduplicated before the pick: a later hit whose `content` repeats an earlier one's (ignoring case and whitespace)
is dropped.
`top_k` comes from the request (1-50); `exact` (request) makes a big workspace rank every memory instead of asking
its approximate index.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from pydantic import Field

from reme_service.flow.op import OpParams
from reme_service.ops.common import fields, keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.common.search import ranked_search
from reme_service.retrieval.periods import Period, period_filter, query_periods, written_in
from reme_service.retrieval.rescore import TEXT_CACHE, Rescoring, diversify, rescore
from reme_service.retrieval.time_expressions import off_loop_for
from reme_service.schema.memory import BaseMemory, memory_from_node
from reme_service.schema.vector_node import SearchHit

MAX_TOP_K = 50
LEXICAL_WEIGHT = 0.4


class RecallVectorStoreParams(OpParams, Rescoring):
    top_k: int | None = None
    threshold_score: float | None = None
    store: str = "default"
    memory_type: str | None = None
    hybrid: bool = True
    lexical_weight: float = LEXICAL_WEIGHT
    speaker_boost: float = 0.3
    time_boost: float = 0.2
    period_boost: float = Field(default=0.3, ge=0.0)
    group_weight: float = 0.5
    group_mode: Literal["sum", "max"] = "max"
    diversity: float = Field(default=0.1, ge=0.0)
    list_diversity: float | None = Field(default=0.3, ge=0.0)
    group_key: str | None = "session"
    rescore_pool: int = Field(default=20, ge=1, le=200)


@lru_cache(maxsize=TEXT_CACHE)
def _content_key(text: str) -> str:
    """What two contents must share to be repeats (case and whitespace aside); cached like `rescore.text_cues`."""
    return " ".join(text.split()).casefold()


class RecallVectorStoreOp(ServiceOp[RecallVectorStoreParams]):
    inputs = (fields.TOP_K,)
    may_input = (fields.EXACT,)  # flows that do not declare `exact` search the default way
    reads = (keys.QUERY,)
    writes = (keys.MEMORY_LIST,)

    async def run(self, ctx: ServiceContext) -> None:
        params = self.params
        query = ctx[keys.QUERY]
        top_k = ctx.input(fields.TOP_K)
        if top_k is None:
            top_k = params.top_k or 3
        top_k = max(1, min(top_k, MAX_TOP_K))
        flt = {"metadata.memory_type": params.memory_type} if params.memory_type else None
        # Over-fetch a little so dropping repeated contents still leaves top_k items.
        rescoring: Rescoring = params  # the params carry the rescoring weights
        active = rescoring.active
        fetch = min(max(top_k * 2, params.rescore_pool if active else 0), max(MAX_TOP_K * 2, 200))
        periods: list[Period] = []
        if params.period_boost > 0:
            periods = await off_loop_for(ctx.services.regex_lane, query_periods, query, datetime.now())
        hits = await self._search(ctx, query, fetch, flt, periods)
        if params.threshold_score is not None:
            hits = [hit for hit in hits if hit.score >= params.threshold_score]
        # read off the stored nodes (`BaseMemory.to_vector_node`'s layout): only the memories returned are built. Each
        # candidate's `content` (`when_to_use` is the node's own text) and group (`metadata[group_key]` as text, None
        # when absent), read inline: this runs for every candidate of the pool
        group_key = params.group_key
        texts: list[str] = []
        groups: list[str | None] = []
        for hit in hits:
            stored = hit.node.metadata
            content = stored.get("content")
            texts.append(content if isinstance(content, str) else "")
            inner = stored.get("metadata") if group_key else None
            value = inner.get(group_key) if isinstance(inner, dict) else None
            groups.append(None if value is None else str(value))
        scores = np.asarray([hit.score for hit in hits], dtype=np.float64)
        if periods:  # the memories written in a period the query names: bonus, then the best `fetch` candidates
            written = [written_in(hit.node.metadata.get("time_created"), periods) for hit in hits]
            scores += params.period_boost * np.asarray(written, dtype=np.float64)
            keep = np.sort(np.argsort(-scores, kind="stable")[:fetch]).tolist()
            hits, texts, groups, scores = (
                [hits[i] for i in keep],
                [texts[i] for i in keep],
                [groups[i] for i in keep],
                scores[keep],
            )
        order = list(range(len(hits)))
        if active and hits:
            scores = rescore(query, texts, scores.tolist(), rescoring, groups)
            order = np.argsort(-scores, kind="stable").tolist()  # stable: search order breaks ties
        # a later hit repeating an earlier one's content is dropped, then the top_k are picked (diversified)
        # (undiversified, or no candidate in a group: the pick is the first top_k, so the rest need no check)
        first_only = (rescoring.diversity <= 0.0 and not rescoring.list_diversity) or groups.count(None) == len(groups)
        seen: set[str] = set()
        unique: list[int] = []
        for i in order:
            key = _content_key(texts[i])
            if key not in seen:
                seen.add(key)
                unique.append(i)
                if first_only and len(unique) >= top_k:
                    break
        memories: list[BaseMemory] = []
        for i in diversify(unique, groups, scores, top_k, rescoring, rescoring.diversity_for(query)):
            memories.append(memory_from_node(hits[i].node, round(hits[i].score, 6)))
        ctx[keys.MEMORY_LIST] = memories
        ctx.publish_memories(memories)

    async def _search(
        self, ctx: ServiceContext, query: str, fetch: int, flt: dict[str, Any] | None, periods: Sequence[Period]
    ) -> list[SearchHit]:
        """The store's best `fetch` hits for `query`; with `periods`, also the best `fetch` of each period (memories
        written in it: `periods.period_filter`), merged without repeats. The query is then embedded once, here, and
        every search gets its vector."""
        params = self.params
        store = ctx.store(params.store)
        exact = ctx.input(fields.EXACT)
        vector = None
        if periods:
            vector = (await ctx.services.store_embedder(params.store).embed([query]))[0]

        weight = params.lexical_weight if params.hybrid else None

        async def search(condition: dict[str, Any] | None) -> list[SearchHit]:
            return await ranked_search(
                store, ctx.workspace_id, query, top_k=fetch, filter=condition, exact=exact, vector=vector,
                lexical_weight=weight,
            )  # fmt: skip

        if not periods:
            return await search(flt)
        found = await asyncio.gather(search(flt), *(search(period_filter(p, flt)) for p in periods))
        seen: set[str] = set()
        merged: list[SearchHit] = []
        for hit in (hit for hits in found for hit in hits):
            if hit.node.unique_id not in seen:
                seen.add(hit.node.unique_id)
                merged.append(hit)
        return merged
