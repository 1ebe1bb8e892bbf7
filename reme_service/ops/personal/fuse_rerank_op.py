"""FuseRerankOp: fuse relevance, memory kind and time into one score; keep the best `top_k`.

For each candidate (dropped when its relevance is below `fuse_score_threshold`, unless it matches the period the
query asks about — "what did I do last week?" is answered by last week's memories however little they resemble
the question):

    fused = relevance × type ratio × time ratio

* type ratio: `fuse_ratio_dict[inner metadata.memory_type]` (observation 1, insight 2, ...), or
  `default_type_ratio` for memories that carry no kind (e.g. inserted directly through `vector_store`);
* time ratio, when the query asks about a period (`TIME_SPAN`): `fuse_time_ratio` if the period the memory
  refers to (`event_start`..`event_end`) overlaps it ("event" match) or the memory was said within it
  ("message" match), else 1. So that time-matching memories beyond the semantic candidates are considered, a
  wider search (`time_recall_top_k` most similar memories of the user) adds those among them that match — ranked
  as RetrieveMemoryOp ranked — on the query vector it left, fused with BM25 at its weight when it searched hybrid
  (`QUERY_LEXICAL_WEIGHT`), so every candidate's relevance is on one scale and the query is embedded once; without
  a RetrieveMemoryOp before it, by this op's own `hybrid` and `lexical_weight`;
* when the query asks *when* something happened ("When did ...", "什么时候") and names no period, memories that
  record an event time get `fuse_time_question_ratio`.

With the workspace's `lifecycle.decay_half_life_days` set, the fused score is also multiplied by the memory's age
decay (`lifecycle.decay`: bounded below by `decay_floor`; off by default). Time-matched candidates from the wider
search are checked for validity like the others.

Then the fused scores are rescored as task retrieval rescores its hits (`retrieval/rescore.py`, `pick`):
`time_boost` for a memory mentioning time when the query asks *when*, and a two-stage day → memory ranking over
`group_key` (`msg_date`, the day a memory was said: a conversation's session), each memory getting `group_weight`
× its day's best fused score over the best day's, so the memories of the day the best match was said come first;
`diversity` / `list_diversity` spread the pick over days (off). `period_search` searches the query's period (said
in it: `periods.period_filter`; about it: `memories.event_filter`) instead of filtering the wider search: it finds
matching memories however many resemble the query more, but costs two filtered scans (off: neutral on LoCoMo).
Defaults chosen by leave-one-conversation-out cross-validation on LoCoMo (`cookbook/bench/locomo_personal_cv.py`:
evidence hit@5 0.684 → 0.718, docs/retrieval_quality.md). `fused_score` is the fusion, `rank_score` the score the
memories were picked by (with the bonuses).

`enable_time_fusion=False` turns every time factor off. The answer lists the memories, each with the time it was
said and, when known, the time it refers to; `metadata.memory_list` holds them with `fused_score` and
`time_match`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

import numpy as np
from pydantic import Field

from reme_service.flow.op import OpParams
from reme_service.ops.common import fields as common_fields, keys as common_keys
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.common.search import ranked_search
from reme_service.ops.personal import fields, keys
from reme_service.ops.personal.lifecycle import decay
from reme_service.ops.personal.memories import INSIGHT, event_filter, event_span, personal_filter, said_at
from reme_service.ops.personal.retrieve_memory_op import PERSONAL_LEXICAL_WEIGHT, hits_to_memories
from reme_service.retrieval.periods import period_filter
from reme_service.retrieval.rescore import Rescoring, diversify, rescore
from reme_service.retrieval.time_expressions import asks_about_time
from reme_service.retrieval.timespan import WEEKDAYS_EN, TimeSpan
from reme_service.schema.memory import BaseMemory, PersonalMemory
from reme_service.schema.vector_node import SearchHit

DEFAULT_RATIOS = {"conversation": 0.5, "observation": 1.0, "obs_customized": 1.2, "insight": 2.0}


class FuseRerankParams(OpParams, Rescoring):
    fuse_score_threshold: float = 0.1
    fuse_ratio_dict: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_RATIOS))
    default_type_ratio: float = 1.0
    fuse_time_ratio: float = 2.0
    fuse_time_question_ratio: float = 1.2
    enable_time_fusion: bool = True
    time_recall_top_k: int = 50
    output_memory_max_count: int | None = None
    store: str = "default"
    hybrid: bool = True
    lexical_weight: float = PERSONAL_LEXICAL_WEIGHT
    # chosen by leave-one-conversation-out cross-validation on LoCoMo (`cookbook/bench/locomo_personal_cv.py`)
    time_boost: float = 0.1
    group_weight: float = 0.7
    group_mode: Literal["sum", "max"] = "max"
    group_key: str | None = "msg_date"
    period_search: bool = False  # searched: neutral on LoCoMo, p95 x6 at 10k memories (retrieval_quality.md)


def group_of(memory: BaseMemory, key: str | None) -> str | None:
    """The group a memory belongs to for the rescoring: its inner `metadata[key]` as text (None when absent)."""
    value = memory.metadata.get(key) if key else None
    return None if value is None else str(value)


def pick(
    query: str, memories: Sequence[BaseMemory], fused: Sequence[float], weights: Rescoring, key: str | None, k: int
) -> list[tuple[int, float]]:
    """The best `k` candidates as (index, final score), best first: each fused score with the rescoring bonuses of
    `weights` (`rescore.rescore`: cues of the query in the memory's content, the group scores over `key`), picked
    diversified (`rescore.diversify`). With no bonus active, the first `k` by fused score."""
    scores = np.asarray(fused, dtype=np.float64)
    if not weights.active:
        order = np.argsort(-scores, kind="stable").tolist()
        return [(i, float(scores[i])) for i in order[:k]]
    groups = [group_of(m, key) for m in memories]
    scores = rescore(query, [m.content for m in memories], scores.tolist(), weights, groups)
    order = np.argsort(-scores, kind="stable").tolist()
    chosen = diversify(order, groups, scores, k, weights, weights.diversity_for(query))
    return [(i, float(scores[i])) for i in chosen]


def time_match(memory: BaseMemory, span: TimeSpan) -> str:
    """The kind of time match: `event` when the memory's event period overlaps `span`, `message` when it was
    said within it, else empty."""
    if isinstance(memory, PersonalMemory):
        event = event_span(memory)
        if event is not None and event.overlaps(span.start, span.end):
            return "event"
        said = said_at(memory)
        if said is not None and span.contains(said):
            return "message"
    return ""


def answer_line(memory: BaseMemory) -> str:
    """`[2023-05-08 13:56:00 Monday] content (time: 2023-05-07)`; insights as `subject: content`."""
    text = memory.content
    if isinstance(memory, PersonalMemory):
        if memory.metadata.get("memory_type") == INSIGHT and memory.reflection_subject:
            text = f"{memory.reflection_subject}: {text}"
        event = event_span(memory)
        if event is not None:
            text = f"{text} (time: {event.label})"
        said = said_at(memory)
        if said is not None:
            return f"[{memory.time_created} {WEEKDAYS_EN[said.weekday()]}] {text}"
    return text


class FuseRerankOp(ServiceOp[FuseRerankParams]):
    inputs = (fields.TOP_K,)
    may_input = (common_fields.EXACT,)
    reads = (common_keys.QUERY,)
    may_read = (
        common_keys.MEMORY_LIST,
        keys.TIME_SPAN,
        keys.TARGET,
        keys.QUERY_VECTOR,
        keys.QUERY_LEXICAL_WEIGHT,
        keys.VALIDITY,
        keys.QUERY_TIME,
    )
    writes = (common_keys.MEMORY_LIST,)

    async def run(self, ctx: ServiceContext) -> None:
        params = self.params
        candidates = ctx.get(common_keys.MEMORY_LIST, [])
        memories = list(candidates)
        span = ctx.get(keys.TIME_SPAN, None) if params.enable_time_fusion else None
        if span is not None and memories:
            memories += await self._time_candidates(ctx, span, {m.memory_id for m in memories})
        when_question = params.enable_time_fusion and span is None and asks_about_time(ctx[common_keys.QUERY])
        lifecycle = ctx.services.config.lifecycle.for_workspace(ctx.workspace_id)
        validity = ctx.get(keys.VALIDITY, None)
        as_of: datetime | None = validity.as_of if validity is not None else None
        if as_of is None and keys.QUERY_TIME in ctx:
            as_of = ctx[keys.QUERY_TIME]
        scored: list[tuple[float, str, BaseMemory]] = []
        for memory in memories:
            relevance = memory.relevance or 0.0
            match = time_match(memory, span) if span is not None else ""
            if relevance < params.fuse_score_threshold and not match:
                continue
            kind = str(memory.metadata.get("memory_type", ""))
            ratio = params.fuse_ratio_dict.get(kind, params.default_type_ratio)
            if match:
                ratio *= params.fuse_time_ratio
            elif when_question and isinstance(memory, PersonalMemory) and event_span(memory) is not None:
                ratio *= params.fuse_time_question_ratio
            if as_of is not None:
                ratio *= decay(memory, as_of, lifecycle)
            fused = relevance * ratio + (params.period_boost if match else 0.0)
            scored.append((fused, match, memory))
        limit = params.output_memory_max_count or ctx.input(fields.TOP_K)
        query = ctx[common_keys.QUERY]
        chosen = pick(query, [m for _, _, m in scored], [f for f, _, _ in scored], params, params.group_key, limit)
        kept = [(*scored[i], score) for i, score in chosen]
        ctx[common_keys.MEMORY_LIST] = [m for _, _, m, _ in kept]
        ctx.response.answer = "\n".join(answer_line(m) for _, _, m, _ in kept)
        ctx.response.metadata["memory_list"] = [self._dump(m, fused, match, rank) for fused, match, m, rank in kept]

    @staticmethod
    def _dump(memory: BaseMemory, fused: float, match: str, rank: float) -> dict[str, Any]:
        scores = {"fused_score": round(fused, 6), "rank_score": round(rank, 6), "time_match": match or None}
        return {**memory.model_dump(mode="json"), **scores}

    async def _time_candidates(self, ctx: ServiceContext, span: TimeSpan, seen: set[str]) -> list[BaseMemory]:
        """Memories beyond the semantic candidates that match `span`, from a wider similarity search."""
        store = ctx.store(self.params.store)
        flt = personal_filter(ctx.get(keys.TARGET, None))
        top_k = self.params.time_recall_top_k
        exact = ctx.input(common_fields.EXACT)
        vector = ctx.get(keys.QUERY_VECTOR, None)
        query = ctx[common_keys.QUERY]
        if vector is None:  # no RetrieveMemoryOp before: this op's own settings
            weight = self.params.lexical_weight if self.params.hybrid else None
        else:  # the vector RetrieveMemoryOp embedded (no second embedding call), ranked as it ranked
            weight = ctx.get(keys.QUERY_LEXICAL_WEIGHT, None)

        async def search(condition: dict[str, Any]) -> list[SearchHit]:
            return await ranked_search(
                store, ctx.workspace_id, query, top_k=top_k, filter=condition, exact=exact, vector=vector,
                lexical_weight=weight,
            )  # fmt: skip

        if self.params.period_search:  # within the period: said in it (`periods.period_filter`), or about it
            found_hits = await asyncio.gather(
                search(period_filter(span.bounds(), flt)), search(event_filter(span, flt))
            )
            hits = sorted((h for group in found_hits for h in group), key=lambda h: h.score, reverse=True)
        else:
            hits = await search(flt)
        found: list[BaseMemory] = []
        for memory in hits_to_memories(hits, validity=ctx.get(keys.VALIDITY, None)):
            if memory.memory_id not in seen and time_match(memory, span):
                seen.add(memory.memory_id)
                found.append(memory)
        return found
