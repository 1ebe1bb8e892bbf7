"""Searching one in-process workspace (`WorkspaceState`): exact scans, the approximate index, hybrid fusion.

Exact search: one pass of row-wise dot products over the live rows (`ranking.dot_rows`), the top k of them
(`ranking.top_rows`); a filter is evaluated lazily, best-scoring rows first (`_filtered_top`). Scores are
`max(cos, 0)`; vectors are normalised on insert. Measured (cookbook/bench/store_speed.py, 2 busy cores): p50 0.7 ms
at 10k x 384 and 6.5 ms at 100k x 384, with or without a filter. An unfiltered search of a workspace of
`QUANTIZED_FROM` rows or more first scans an int8 copy of the rows (`stores/inproc/quantized.py`, ~4x less memory to
read) that bounds every row's score, then scores exactly only the rows that can be in the top k (`scan_top`): the
same hits and scores, 10k x 384 in ~0.24 ms instead of ~0.49 (hybrid, top 20). A workspace with an approximate index
(`stores/inproc/ann.py`) takes its candidates from the graph and re-scores them exactly (`_approximate`).

Hybrid search (`hybrid_search`) fuses those scores with BM25 over the node texts (`stores/lexical.py`); the
workspace's lexical index is built on its first hybrid search.

Where a search runs (`run_search`): searches run inline on the event loop up to `INLINE_SEARCH_CELLS` matrix cells
(about 15k x 384, ~1 ms of hybrid scoring), under the workspace's shared gate; on 2 cores the hop to a worker thread
and back cost more than it saved. Measured over HTTP (`retrieve_task_memory`, memory store, thread vs inline): p50
1.46 -> 1.17 ms and 16 clients 795 -> 881 req/s at 10k; 2.2 -> 1.9 ms at 20k; at 100k inline lost (16 clients:
145 -> 128 req/s), since a thread lets the search overlap the event loop's work. A very selective filter can make a
search test every node (~0.15 us each, so ~2 ms inline at 15k).
"""

from __future__ import annotations

from functools import partial

import numpy as np
from numpy.typing import NDArray

from reme_service.schema.vector_node import SearchHit
from reme_service.stores.inproc.ann import MIN_CANDIDATES, AnnIndex
from reme_service.stores.inproc.packed import StoredFilter
from reme_service.stores.inproc.ranking import dot_rows, first_matching, kth_highest, top_rows
from reme_service.stores.inproc.workspace import INLINE_ROWS, WorkspaceState
from reme_service.stores.lexical import fuse

INLINE_SEARCH_CELLS = 6_000_000
RESCAN_SHARE = 8  # an int8 pre-scan is used unless its candidates are more than this share of the rows


def search(
    state: WorkspaceState, query: NDArray[np.float32], top_k: int, predicate: StoredFilter | None, exact: bool = False
) -> list[SearchHit]:
    """The top_k rows by cosine: through the approximate index when there is one (unless `exact`)."""
    n = state.size
    k = min(top_k, n)
    if k <= 0:
        return []
    if state.ann is not None and not exact:
        hits = _approximate(state, state.ann, query, k, predicate, None, 0.0)
        if hits is not None:
            return hits
    return scan_top(state, query, k, None, 0.0, predicate)


def hybrid_search(
    state: WorkspaceState,
    query: NDArray[np.float32],
    text: str,
    top_k: int,
    predicate: StoredFilter | None,
    weight: float,
    exact: bool = False,
) -> list[SearchHit]:
    """Like `search`, ranked by cosine fused with BM25 (`lexical.fuse`); builds the lexical index if needed."""
    n = state.size
    k = min(top_k, n)
    if k <= 0:
        return []
    lexical = state.lexical_index().scores(text)
    if state.ann is not None and not exact:
        hits = _approximate(state, state.ann, query, k, predicate, lexical, weight)
        if hits is not None:
            return hits
    return scan_top(state, query, k, lexical, weight, predicate)


def scan_top(
    state: WorkspaceState,
    query: NDArray[np.float32],
    k: int,
    lexical: NDArray[np.float32] | None,
    weight: float,
    predicate: StoredFilter | None,
) -> list[SearchHit]:
    """The exact top k of every row matching `predicate` (cosine, fused with BM25 when `lexical` is given).
    Unfiltered, a workspace of `QUANTIZED_FROM` rows or more scans its int8 copy first (`quantized.py`):
    only the rows whose score bound reaches the k-th best lower bound are scored from the float32 matrix; if that
    is more than `1 / RESCAN_SHARE` of the rows, every row is."""
    n = state.size
    quantized = state.quantized_rows() if predicate is None else None
    if quantized is not None:
        approx, slack = quantized.scores(query, n)
        top = float(lexical.max()) if lexical is not None else 0.0
        if lexical is not None and weight > 0.0 and top > 0.0:
            approx = fuse(approx, lexical, weight, top)  # clipping and scaling keep the bound: times (1 - weight)
            slack *= np.float32(1.0 - weight)
        floor = kth_highest(approx - slack, k)  # the k-th best lower bound
        rows = np.flatnonzero(approx + slack >= floor)
        if len(rows) * RESCAN_SHARE <= n:
            cosine = dot_rows(state.matrix[rows], query)
            scores = cosine if lexical is None else fuse(cosine, lexical[rows], weight, top)
            best = top_rows(scores, k)
            return _hits(state, rows[best], scores[best])
    scores = dot_rows(state.matrix[:n], query)
    return _top_hits(state, scores if lexical is None else fuse(scores, lexical, weight), k, predicate)


def _approximate(
    state: WorkspaceState,
    ann: AnnIndex,
    query: NDArray[np.float32],
    k: int,
    predicate: StoredFilter | None,
    lexical: NDArray[np.float32] | None,
    weight: float,
) -> list[SearchHit] | None:
    """The top k from the index's candidates, re-scored exactly (so scores equal an exact search's). A filter is
    applied to the ranked candidates (post-filter), widening the candidates 4x while fewer than k match; None
    when that reaches half the rows (or the graph runs dry): the caller then ranks every row exactly.

    Hybrid (`lexical`, every row's BM25): a row the graph did not propose has a cosine of at most the lowest
    proposed one, so only rows whose BM25 alone could lift them past the k-th fused score can still be missing;
    those are added and everything is ranked again. The answer is then the exact one whenever the graph's
    candidates are the true nearest rows."""
    n = state.size
    top = float(lexical.max()) if lexical is not None and n else 0.0
    count = max(ann.params.candidates * k, MIN_CANDIDATES)
    while True:
        wanted = min(count, n)
        rows = ann.candidates(query, wanted)
        short = len(rows) < wanted
        cosine = dot_rows(state.matrix[rows], query)
        scores, picked = _ranked(state, rows, cosine, lexical, weight, top, k, predicate)
        if lexical is not None and len(picked) == k and weight > 0 and top > 0:
            floor = max(float(cosine.min()), 0.0) if len(rows) and not short else 0.0
            bound = (float(scores[picked[-1]]) - (1.0 - weight) * floor) * top / weight
            extra = np.setdiff1d(np.flatnonzero(lexical >= bound), rows)
            if len(extra):
                rows = np.concatenate([rows, extra])
                cosine = np.concatenate([cosine, dot_rows(state.matrix[extra], query)])
                scores, picked = _ranked(state, rows, cosine, lexical, weight, top, k, predicate)
        if len(picked) == k:
            return _hits(state, rows[picked], scores[picked])
        if short or count >= n // 2:
            return None
        count *= 4


def _ranked(
    state: WorkspaceState,
    rows: NDArray[np.intp],
    cosine: NDArray[np.float32],
    lexical: NDArray[np.float32] | None,
    weight: float,
    top: float,
    k: int,
    predicate: StoredFilter | None,
) -> tuple[NDArray[np.float32], NDArray[np.intp]]:
    """The candidates' scores (fused with BM25 when `lexical` is given) and the positions of the best k of them
    that match `predicate`, best first."""
    scores = cosine if lexical is None else fuse(cosine, lexical[rows], weight, top)
    ranked = np.argsort(-scores, kind="stable")
    picked = ranked[:k] if predicate is None else first_matching(ranked, rows, state.nodes.tester(predicate), k)
    return scores, picked


def _top_hits(
    state: WorkspaceState, scores: NDArray[np.float32], k: int, predicate: StoredFilter | None
) -> list[SearchHit]:
    rows = top_rows(scores, k) if predicate is None else _filtered_top(state, scores, k, predicate)
    return _hits(state, rows, scores[rows])


def _hits(state: WorkspaceState, rows: NDArray[np.intp], scores: NDArray[np.float32]) -> list[SearchHit]:
    return state.nodes.hits(rows.tolist(), np.clip(scores, 0.0, 1.0).tolist())


def _filtered_top(
    state: WorkspaceState, scores: NDArray[np.float32], k: int, predicate: StoredFilter
) -> NDArray[np.intp]:
    """The k best matching rows. The filter is evaluated lazily, best-scoring rows first, over a window of
    the top rows (any row outside scores no higher than those inside, so the first k matches are the
    answer); when a filter proves selective the window widens, and past half the rows every node is tested."""
    n, test = len(scores), state.nodes.tester(predicate)
    window = max(8 * k, 64)
    while window < n // 2:
        found: list[int] = []
        for row in top_rows(scores, window).tolist():
            if test(row):
                found.append(row)
                if len(found) == k:
                    return np.asarray(found, dtype=np.intp)
        window = max(4 * window, 2 * window * k // max(len(found), 1))
    candidates = np.flatnonzero(np.fromiter(map(test, range(n)), dtype=bool, count=n))
    return candidates[top_rows(scores[candidates], min(k, len(candidates)))]


def search_inline(state: WorkspaceState, exact: bool = False) -> bool:
    """Whether a search of `state` is cheap enough to run on the event loop (see the module docstring). An
    approximate search is not: a filter that matches little can widen it to a large part of the rows."""
    return state.size * (state.dim or 0) <= INLINE_SEARCH_CELLS and (exact or state.ann is None)


async def run_search(
    state: WorkspaceState,
    query: NDArray[np.float32],
    top_k: int,
    predicate: StoredFilter | None,
    exact: bool,
    *,
    text: str | None = None,
    weight: float = 0.0,
) -> list[SearchHit]:
    """`search`, or with `text` `hybrid_search`, of `state` under the shared gate: on the event loop when cheap
    (`search_inline`), else in a worker thread. A first hybrid search builds the BM25 index (tokenising every
    node): off the loop unless the workspace is small."""
    if text is None:
        work = partial(search, state, query, top_k, predicate, exact)
        return await state.gate.run_shared(work, inline=search_inline(state, exact))
    hybrid = partial(hybrid_search, state, query, text, top_k, predicate, weight, exact)
    inline = search_inline(state, exact) if state.lexical is not None else state.size < INLINE_ROWS // 8
    return await state.gate.run_shared(hybrid, inline=inline)
