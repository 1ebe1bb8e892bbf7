"""The in-RAM vector store (backend "memory"), also the engine under the durable "local" backend.

Each workspace is a `WorkspaceState`: one contiguous float32 matrix with spare capacity (grown by 1.5x), the
nodes (`node_table.NodeTable`: per row the id and one blob of metadata JSON and content, compressed in big
workspaces) in row order, and an id -> row dict. Deleting
swaps the last row into the hole, so the live rows stay contiguous and a search is one matrix-vector product
over `matrix[:size]`. Listing
must follow insertion order, which the rows no longer do after a swap: the id -> row dict provides it, because
a Python dict keeps insertion order, keeps a key's place when its value (the row) is reassigned, and forgets
a key in O(1). So a replaced node keeps its original place, like a dict entry.

Concurrency. Writes to one workspace are serialised by an internal per-workspace lock (not `lock()`, which
belongs to callers) and run as shielded tasks, so a cancelled caller never leaves a half-applied write.
Embedding happens before that lock is taken. Reads and writes share the arrays through a `_Gate`: work over
fewer than `INLINE_ROWS` rows runs inline on the event loop (scoring 2,000 x 384 takes ~60 µs, a filter
~0.15 µs a node, far below a thread hop's cost), larger work in a worker thread; a mutation waits until no
reader is in flight and holds new readers off while it runs. Searches run inline up to `INLINE_SEARCH_CELLS`
matrix cells (about 15k x 384, ~1 ms of hybrid scoring): on 2 cores the hop to a worker thread and back cost more
than it saved. Measured over HTTP (`retrieve_task_memory`, memory store, thread vs inline): p50 1.46 -> 1.17 ms
and 16 clients 795 -> 881 req/s at 10k; 2.2 -> 1.9 ms at 20k; at 100k inline lost (16 clients: 145 -> 128 req/s),
since a thread lets the search overlap the event loop's work. A very selective filter can make a search test
every node (~0.15 µs each, so ~2 ms inline at 15k).

Search: one pass of row-wise dot products over the live rows (`_dot_rows`), `np.argpartition` for the top k (over
many rows, of the rows at or above the k-th highest block maximum only: `_above_block_maxima`), then a sort of
those k; a filter is evaluated lazily, best-scoring rows first (`_filtered_top`). Scores are
`max(cos, 0)`; vectors are normalised on insert. Measured (cookbook/bench/store_speed.py, 2 busy cores):
p50 0.7 ms at 10k x 384 and 6.5 ms at 100k x 384, with or without a filter. An unfiltered search of a workspace of
`QUANTIZED_FROM` rows or more first scans an int8 copy of the rows (`stores/inproc/quantized.py`, ~4x less memory to
read) that bounds every row's score, then scores exactly only the rows that can be in the top k (`scan_top`): the
same hits and scores, 10k x 384 in ~0.24 ms instead of ~0.49 (hybrid, top 20).

Hybrid search (`search_hybrid`) fuses those scores with BM25 over the node texts (`stores/lexical.py`). A
workspace's lexical index is built on its first hybrid search and from then on maintained by `apply_upsert` /
`apply_delete` (O(terms) per node); a workspace never searched that way pays nothing on writes. A replaced or
reloaded workspace is a new state whose index is built lazily again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import numpy as np
import orjson
from numpy.typing import NDArray

from reme_service.concurrency import OFF_LOOP_ITEMS
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.schema.workspace_ids import validate_workspace_id
from reme_service.stores.base import Filter, VectorStore, consume_exception
from reme_service.stores.inproc.ann import MIN_CANDIDATES, AnnIndex
from reme_service.stores.inproc.node_table import NodeTable
from reme_service.stores.inproc.packed import (
    PackedNodes,
    StoredFilter,
    StoredNode,
    compile_stored_filter,
    export_node,
)
from reme_service.stores.inproc.quantized import QuantizedRows
from reme_service.stores.lexical import LexicalIndex, fuse
from reme_service.stores.params import AnnParams, MemoryStoreParams
from reme_service.stores.spaces import EmbeddingSpace, check_space, recorded_space
from reme_service.stores.summary import Tally, WorkspaceSummary
from reme_service.stores.vectors import (
    QueryVector,
    as_query,
    batch_dimension,
    dimension_error,
    embed_checked,
    latest_by_id,
    normalise_rows,
)

T = TypeVar("T")

logger = logging.getLogger(__name__)

INLINE_ROWS = 2_000
INLINE_SEARCH_CELLS = 6_000_000
TOP_BLOCK = 1_024  # scores per block when picking the top k of many (`_above_block_maxima`)
QUANTIZED_FROM = 4_096  # rows from which an exact scan goes through the int8 copy first (`stores/inproc/quantized.py`)
RESCAN_SHARE = 8  # ... unless its candidates are more than this share of the rows
KTH_BLOCK = 32  # values per block when finding the k-th highest of many (`_kth_highest`)
_MIN_CAPACITY = 64
_GROWTH = 1.5


class _Gate:
    """Readers share a workspace's arrays; a mutation waits for running readers and holds new ones off."""

    __slots__ = ("_readers", "_writing", "_changed")

    def __init__(self) -> None:
        self._readers = 0
        self._writing = False
        self._changed: asyncio.Event | None = None

    async def _wait(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        await self._changed.wait()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _release_shared(self) -> None:
        self._readers -= 1
        if not self._readers:
            self._notify()

    def _release_exclusive(self) -> None:
        self._writing = False
        self._notify()

    async def run_shared(self, fn: Callable[[], T], *, inline: bool) -> T:
        while self._writing:
            await self._wait()
        self._readers += 1
        return await self._run(fn, inline, self._release_shared)

    async def run_exclusive(self, fn: Callable[[], T], *, inline: bool) -> T:
        """Run a mutation alone. Callers hold the workspace's write lock, so there is one writer at a time."""
        self._writing = True
        try:
            while self._readers:
                await self._wait()
        except BaseException:
            self._release_exclusive()
            raise
        return await self._run(fn, inline, self._release_exclusive)

    @staticmethod
    async def _run(fn: Callable[[], T], inline: bool, release: Callable[[], None]) -> T:
        if inline:
            try:
                return fn()
            finally:
                release()
        # The gate is released when the thread ends, not when an awaiting caller is cancelled.
        future = asyncio.ensure_future(asyncio.to_thread(fn))

        def finished(done: asyncio.Future[T]) -> None:
            release()
            consume_exception(done)

        future.add_done_callback(finished)
        return await asyncio.shield(future)


@dataclass(slots=True)
class Batch:
    """Nodes ready to store: unique ids (last occurrence wins), copies without vectors, normalised rows."""

    nodes: list[StoredNode]
    vectors: NDArray[np.float32]
    dim: int | None
    space: EmbeddingSpace | None = None  # the embedding space of the vectors (`stores/spaces.py`)


class WorkspaceState:
    """One workspace in RAM. Mutators run only under the gate's exclusive side (or on a private state)."""

    __slots__ = (
        "dim",
        "space",
        "matrix",
        "nodes",
        "rows",
        "gate",
        "lexical",
        "_lexical_lock",
        "_sorted_ids",
        "ann",
        "ann_dirty",
        "quantized",
        "_tally",
    )

    def __init__(
        self, dim: int | None = None, matrix: NDArray[np.float32] | None = None, space: EmbeddingSpace | None = None
    ) -> None:
        self.dim = dim
        self.space = space  # the embedding space of the vectors; None until a write records one
        self.matrix: NDArray[np.float32] = np.empty((0, dim or 0), np.float32) if matrix is None else matrix
        self.nodes = NodeTable()  # row order
        self.rows: dict[str, int] = {}  # id -> row, in insertion order
        self.gate = _Gate()
        self.lexical: LexicalIndex | None = None  # BM25 over node contents by row; built on first hybrid search
        self._lexical_lock = threading.Lock()
        self._sorted_ids: list[str] | None = None  # the ids in order, kept until the set of ids changes
        self.ann: AnnIndex | None = None  # the approximate index (big workspaces), kept in step with the rows
        self.ann_dirty: set[int] | None = None  # while an index is built: the rows changed since it started
        self.quantized: QuantizedRows | None = None  # the int8 copy for exact scans; built on first search
        self._tally: Tally | None = None  # counts by type and latest time (`summarize`), kept up once asked for

    def sorted_ids(self) -> list[str]:
        """The ids in sorted order (a copy), sorted once per change of the set of ids: paging through a workspace
        costs a copy, not a sort. Runs under the shared gate; two readers racing both build the same list."""
        ordered = self._sorted_ids
        if ordered is None:
            ordered = self._sorted_ids = sorted(self.rows)
        return list(ordered)

    @property
    def size(self) -> int:
        return len(self.nodes)

    def summarize(self) -> WorkspaceSummary:
        """The workspace's summary (`stores/summary.py`). The first call counts every row's stored metadata (no
        node is made); the tally is then kept up to date by the writes (`apply_upsert`, `apply_delete`), so later
        calls cost nothing, until a delete or replace removes the node holding the latest time (the tally is then
        `stale` and counted afresh). Runs under the shared gate; two readers racing both count the same."""
        tally = self._tally
        if not self.summary_kept():
            tally = self._tally = Tally.of(self.nodes.metadatas())
        assert tally is not None
        return tally.summary()

    def summary_kept(self) -> bool:
        """Whether `summarize` answers from its kept tally (no count to make)."""
        tally = self._tally
        return tally is not None and not tally.stale and tally.size() == self.size

    @classmethod
    def build(cls, batch: Batch) -> WorkspaceState:
        state = cls(batch.dim, space=batch.space)
        if batch.dim is not None:
            nodes = batch.nodes
            state.nodes = NodeTable.planned(len(nodes), lambda rows: (nodes[row] for row in rows))
            matrix = state.grown(len(nodes), batch.dim)
            state.apply_upsert(nodes, batch.vectors, dim=batch.dim, matrix=matrix)
        return state

    def count_new(self, ids: Iterable[str]) -> int:
        rows = self.rows
        return sum(1 for uid in ids if uid not in rows)

    def grown(self, needed: int, dim: int) -> NDArray[np.float32] | None:
        """A larger copy of the matrix when `needed` rows do not fit, else None. Only reads `self`."""
        capacity = self.matrix.shape[0]
        if needed <= capacity and self.matrix.shape[1] == dim:
            return None
        matrix = np.empty((max(needed, int(capacity * _GROWTH), _MIN_CAPACITY), dim), np.float32)
        if self.size:
            matrix[: self.size] = self.matrix[: self.size]
        return matrix

    def apply_upsert(
        self,
        nodes: Sequence[StoredNode],
        vectors: NDArray[np.float32],
        *,
        dim: int,
        matrix: NDArray[np.float32] | None = None,
    ) -> None:
        """Insert or replace `nodes` (unique ids); `matrix` is a `grown()` buffer when rows must be added."""
        if matrix is not None:
            self.matrix = matrix
        self.dim = dim
        rows, row_nodes, lexical, tally = self.rows, self.nodes, self.lexical, self._tally
        targets = np.empty(len(nodes), np.intp)
        for i, node in enumerate(nodes):
            row = rows.get(node.unique_id)
            if row is None:
                self._sorted_ids = None
                row = rows[node.unique_id] = len(row_nodes)
                row_nodes.append(node)
                if lexical is not None:
                    lexical.append(node.content)
            else:
                if lexical is not None:
                    lexical.replace(row, row_nodes.content(row), node.content)
                if tally is not None:
                    tally.remove(row_nodes.metadata(row))
                row_nodes.replace(row, node)
            if tally is not None:
                tally.add(orjson.loads(node.meta))
            targets[i] = row
        self.matrix[targets] = vectors
        if self.ann is not None:
            self.ann.upsert(targets, vectors)
        if self.ann_dirty is not None:
            self.ann_dirty.update(targets.tolist())
        if self.quantized is not None:
            self.quantized.mark(targets.tolist())
            self.quantized.sync(self.matrix, self.size)

    def apply_delete(self, ids: Iterable[str]) -> int:
        """Delete by id, moving the last row into each hole; returns how many existed."""
        deleted = 0
        rows, row_nodes, matrix, lexical = self.rows, self.nodes, self.matrix, self.lexical
        ann, dirty, quantized, tally = self.ann, self.ann_dirty, self.quantized, self._tally
        for uid in ids:
            row = rows.pop(uid, None)
            if row is None:
                continue
            self._sorted_ids = None
            deleted += 1
            if tally is not None:
                tally.remove(row_nodes.metadata(row))
            last = len(row_nodes) - 1
            if lexical is not None:  # the same swap: the last row moves into the hole
                lexical.remove(row, row_nodes.content(row), row_nodes.content(last))
            if ann is not None:
                ann.delete(row, last)
            if dirty is not None:
                dirty.update((row, last))
            moved = row_nodes.delete(row)
            if moved is not None:
                rows[moved] = row  # keeps the moved id's insertion position
                matrix[row] = matrix[last]
                if quantized is not None:
                    quantized.mark((row,))
        if quantized is not None:
            quantized.sync(matrix, len(row_nodes))
        return deleted

    def search(
        self, query: NDArray[np.float32], top_k: int, predicate: StoredFilter | None, exact: bool = False
    ) -> list[SearchHit]:
        """The top_k rows by cosine: through the approximate index when there is one (unless `exact`)."""
        n = self.size
        k = min(top_k, n)
        if k <= 0:
            return []
        if self.ann is not None and not exact:
            hits = self._approximate(self.ann, query, k, predicate, None, 0.0)
            if hits is not None:
                return hits
        return self.scan_top(query, k, None, 0.0, predicate)

    def hybrid_search(
        self,
        query: NDArray[np.float32],
        text: str,
        top_k: int,
        predicate: StoredFilter | None,
        weight: float,
        exact: bool = False,
    ) -> list[SearchHit]:
        """Like `search`, ranked by cosine fused with BM25 (`lexical.fuse`); builds the lexical index if needed."""
        n = self.size
        k = min(top_k, n)
        if k <= 0:
            return []
        lexical = self.lexical_index().scores(text)
        if self.ann is not None and not exact:
            hits = self._approximate(self.ann, query, k, predicate, lexical, weight)
            if hits is not None:
                return hits
        return self.scan_top(query, k, lexical, weight, predicate)

    def scan_top(
        self,
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
        n = self.size
        quantized = self.quantized_rows() if predicate is None else None
        if quantized is not None:
            approx, slack = quantized.scores(query, n)
            top = float(lexical.max()) if lexical is not None else 0.0
            if lexical is not None and weight > 0.0 and top > 0.0:
                approx = fuse(approx, lexical, weight, top)  # clipping and scaling keep the bound: times (1 - weight)
                slack *= np.float32(1.0 - weight)
            floor = _kth_highest(approx - slack, k)  # the k-th best lower bound
            rows = np.flatnonzero(approx + slack >= floor)
            if len(rows) * RESCAN_SHARE <= n:
                cosine = _dot_rows(self.matrix[rows], query)
                scores = cosine if lexical is None else fuse(cosine, lexical[rows], weight, top)
                best = _top_rows(scores, k)
                return self._hits(rows[best], scores[best])
        scores = _dot_rows(self.matrix[:n], query)
        return self._top_hits(scores if lexical is None else fuse(scores, lexical, weight), k, predicate)

    def quantized_rows(self) -> QuantizedRows | None:
        """The int8 copy of the rows (built on first use, under the lexical index's lock), or None for a workspace
        under `QUANTIZED_FROM` rows (its float32 scan is cheap), or with an approximate index (which has its own) or
        one being built (a copy made now would be dropped when it is attached)."""
        if self.size < QUANTIZED_FROM or self.ann is not None or self.ann_dirty is not None:
            return None
        quantized = self.quantized
        if quantized is None:
            with self._lexical_lock:
                quantized = self.quantized
                if quantized is None:
                    quantized = self.quantized = QuantizedRows.of(self.matrix, self.size)
        return quantized

    def _approximate(
        self,
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
        n = self.size
        top = float(lexical.max()) if lexical is not None and n else 0.0
        count = max(ann.params.candidates * k, MIN_CANDIDATES)
        while True:
            wanted = min(count, n)
            rows = ann.candidates(query, wanted)
            short = len(rows) < wanted
            cosine = _dot_rows(self.matrix[rows], query)
            scores, picked = self._ranked(rows, cosine, lexical, weight, top, k, predicate)
            if lexical is not None and len(picked) == k and weight > 0 and top > 0:
                floor = max(float(cosine.min()), 0.0) if len(rows) and not short else 0.0
                bound = (float(scores[picked[-1]]) - (1.0 - weight) * floor) * top / weight
                extra = np.setdiff1d(np.flatnonzero(lexical >= bound), rows)
                if len(extra):
                    rows = np.concatenate([rows, extra])
                    cosine = np.concatenate([cosine, _dot_rows(self.matrix[extra], query)])
                    scores, picked = self._ranked(rows, cosine, lexical, weight, top, k, predicate)
            if len(picked) == k:
                return self._hits(rows[picked], scores[picked])
            if short or count >= n // 2:
                return None
            count *= 4

    def _ranked(
        self,
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
        picked = ranked[:k] if predicate is None else _first_matching(ranked, rows, self.nodes.tester(predicate), k)
        return scores, picked

    def attach_ann(self, ann: AnnIndex) -> None:
        """Adopt an index built from an earlier state of the rows, re-reading the rows changed since (exclusive)."""
        ann.resync(self.ann_dirty or (), self.matrix, self.size)
        self.ann, self.ann_dirty, self.quantized = ann, None, None  # the index has its own quantised copy

    def lexical_index(self) -> LexicalIndex:
        """The BM25 index, built from the nodes on first use. Runs under the shared gate, where concurrent
        readers (worker threads for large workspaces) may race to build it: the lock makes one build it."""
        index = self.lexical
        if index is None:
            with self._lexical_lock:
                index = self.lexical
                if index is None:
                    index = self.lexical = LexicalIndex.build(self.nodes.contents())
        return index

    def _top_hits(self, scores: NDArray[np.float32], k: int, predicate: StoredFilter | None) -> list[SearchHit]:
        rows = _top_rows(scores, k) if predicate is None else self._filtered_top(scores, k, predicate)
        return self._hits(rows, scores[rows])

    def _hits(self, rows: NDArray[np.intp], scores: NDArray[np.float32]) -> list[SearchHit]:
        return self.nodes.hits(rows.tolist(), np.clip(scores, 0.0, 1.0).tolist())

    def _filtered_top(self, scores: NDArray[np.float32], k: int, predicate: StoredFilter) -> NDArray[np.intp]:
        """The k best matching rows. The filter is evaluated lazily, best-scoring rows first, over a window of
        the top rows (any row outside scores no higher than those inside, so the first k matches are the
        answer); when a filter proves selective the window widens, and past half the rows every node is tested."""
        n, test = len(scores), self.nodes.tester(predicate)
        window = max(8 * k, 64)
        while window < n // 2:
            found: list[int] = []
            for row in _top_rows(scores, window).tolist():
                if test(row):
                    found.append(row)
                    if len(found) == k:
                        return np.asarray(found, dtype=np.intp)
            window = max(4 * window, 2 * window * k // max(len(found), 1))
        candidates = np.flatnonzero(np.fromiter(map(test, range(n)), dtype=bool, count=n))
        return candidates[_top_rows(scores[candidates], min(k, len(candidates)))]

    def export(self, predicate: StoredFilter | None, with_vectors: bool) -> list[VectorNode]:
        nodes = self.nodes
        test = nodes.tester(predicate) if predicate is not None else None
        rows = [row for row in self.rows.values() if test is None or test(row)]
        if not with_vectors:
            return [export_node(nodes[row]) for row in rows]
        vectors = self.matrix[rows]
        return [export_node(nodes[row], vectors[i]) for i, row in enumerate(rows)]

    def get(self, ids: Sequence[str]) -> list[VectorNode]:
        found = [row for uid in ids if (row := self.rows.get(uid)) is not None]
        vectors = self.matrix[found]
        return [export_node(self.nodes[row], vectors[i]) for i, row in enumerate(found)]


def _first_matching(
    ranked: NDArray[np.intp], rows: NDArray[np.intp], test: Callable[[int], bool], k: int
) -> NDArray[np.intp]:
    """The first k positions of `ranked` whose row's node matches (the filter is tested lazily, in rank order)."""
    found: list[int] = []
    row_list = rows.tolist()
    for i in ranked.tolist():
        if test(row_list[i]):
            found.append(i)
            if len(found) == k:
                break
    return np.asarray(found, dtype=np.intp)


def _dot_rows(matrix: NDArray[np.float32], query: NDArray[np.float32]) -> NDArray[np.float32]:
    """Each row's dot product with `query`. Deliberately not BLAS (`matrix @ query`): OpenBLAS's threaded gemv
    spins its threads and slows 10-70x when the cores are busy (10k x 384: 0.1 ms idle, 8 ms under load), and
    single-threaded it is slower past 50k rows; `np.vecdot` is one SIMD pass bound by memory bandwidth
    (100k x 384: ~5.5 ms, idle or not). numpy < 2 has no vecdot; einsum is the same kind of loop."""
    if hasattr(np, "vecdot"):
        return np.vecdot(matrix, query)
    return np.einsum("ij,j->i", matrix, query)


def _top_rows(scores: NDArray[np.float32], k: int) -> NDArray[np.intp]:
    """The indices of the k highest scores, highest first, equal scores in row order (a partition, then a sort of
    those k only). The partition takes the k *lowest* of the negated scores: numpy's introselect asked for the
    k highest directly (`kth = n - k`) slows ~16x when most scores are equal (10k scores of 6 distinct values,
    as a bag-of-words embedder gives: 0.98 ms against 0.06)."""
    total = len(scores)
    if k >= total:
        top = np.arange(total)
    else:
        pool = _above_block_maxima(scores, k)
        top = np.argpartition(-(scores if pool is None else scores[pool]), k - 1)[:k]
        if pool is not None:
            top = pool[top]
        top.sort()
    return top[np.argsort(-scores[top], kind="stable")]


def _kth_highest(values: NDArray[np.float32], k: int) -> float:
    """The k-th highest of `values` (1 <= k <= len), partitioning only the values that can be among the k highest
    (`_above_block_maxima` over blocks of `KTH_BLOCK`); 10k values: ~20 µs instead of ~50 for a partition of all."""
    pool = _above_block_maxima(values, k, KTH_BLOCK)
    if pool is not None:
        values = values[pool]
    return float(-np.partition(-values, k - 1)[k - 1])  # negated: see `_top_rows`


def _above_block_maxima(scores: NDArray[np.float32], k: int, block: int = TOP_BLOCK) -> NDArray[np.intp] | None:
    """The rows that can be among the k best of many scores, or None when there are too few for this to pay: the
    k-th highest of the maxima of blocks of `block` scores is at most the k-th highest score (k blocks reach it),
    so every row of the top k scores at least that. One pass for the maxima and one comparison replace a partition of
    every score (1M scores: ~2 ms instead of ~8)."""
    blocks = len(scores) // block
    if blocks < 4 * k:
        return None
    maxima = scores[: blocks * block].reshape(blocks, block).max(axis=1)
    floor = -np.partition(-maxima, k - 1)[k - 1]  # the k-th highest (see `_top_rows` for the negation)
    return np.flatnonzero(scores >= floor)


def _search_inline(state: WorkspaceState, exact: bool = False) -> bool:
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
    """`state.search`, or with `text` `state.hybrid_search`, under the shared gate: on the event loop when cheap
    (`_search_inline`), else in a worker thread. A first hybrid search builds the BM25 index (tokenising every
    node): off the loop unless the workspace is small."""
    if text is None:
        work = partial(state.search, query, top_k, predicate, exact)
        return await state.gate.run_shared(work, inline=_search_inline(state, exact))
    hybrid = partial(state.hybrid_search, query, text, top_k, predicate, weight, exact)
    inline = _search_inline(state, exact) if state.lexical is not None else state.size < INLINE_ROWS // 8
    return await state.gate.run_shared(hybrid, inline=inline)


def _build_batch(
    workspace_id: str,
    unique: list[VectorNode],
    missing: list[int],
    embedded: NDArray[np.float32] | None,
    dim: int,
) -> Batch:
    vectors = np.empty((len(unique), dim), np.float32)
    for i, node in enumerate(unique):
        if node.vector is not None:
            vectors[i] = node.vector
    if missing and embedded is not None:
        vectors[missing] = embedded
    nodes = [StoredNode.encode(n.unique_id, workspace_id, n.content, n.metadata) for n in unique]
    return Batch(nodes, normalise_rows(vectors), dim)


def _unique_rows(rows: Sequence[StoredNode], workspace_id: str) -> tuple[list[StoredNode], list[str]]:
    """The last row of each id, as rows of `workspace_id`, and their texts."""
    latest: dict[str, StoredNode] = {}
    for row in rows:
        latest[row.unique_id] = row
    unique = [
        row if row.workspace_id == workspace_id else StoredNode(row.unique_id, workspace_id, row.content, row.meta)
        for row in latest.values()
    ]
    return unique, [row.content for row in unique]


def _normalised_copy(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    return normalise_rows(np.array(vectors, dtype=np.float32))


class MemoryVectorStore(VectorStore):
    """Workspaces in RAM; nothing survives the process. Subclasses add persistence through the `_persist_*` /
    `_log_*` hooks, which run under the workspace's write lock before the in-RAM state changes."""

    backend = "memory"

    def __init__(self, params: MemoryStoreParams | None = None, *, embedder: EmbeddingClient) -> None:
        """`params` is accepted for symmetry with the other backends; a ReMe `store_dir` in it is ignored."""
        super().__init__(embedder=embedder)
        self._spaces: dict[str, WorkspaceState] = {}
        self.ann_params = params.ann if params is not None else AnnParams()
        self._ann_builds: set[asyncio.Task[None]] = set()
        self._closing = False
        if params is not None and params.store_dir is not None and type(self) is MemoryVectorStore:
            logger.info(
                "vector_store backend memory keeps nothing on disk: params.store_dir (a ReMe setting) is ignored"
            )

    def resident_workspaces(self) -> int | None:
        return len(self._spaces)

    # ----- persistence hooks (no-ops in RAM) -----

    async def _load(self, workspace_id: str) -> WorkspaceState | None:
        return None

    async def _exists_persisted(self, workspace_id: str) -> bool:
        return False

    async def _list_persisted(self) -> list[str]:
        return []

    async def _persist_create(self, workspace_id: str, state: WorkspaceState) -> None:
        return None

    async def _persist_replace(self, workspace_id: str, state: WorkspaceState) -> None:
        return None

    async def _persist_drop(self, workspace_id: str) -> bool:
        return False

    async def _log_upsert(self, workspace_id: str, state: WorkspaceState, batch: Batch) -> None:
        return None

    async def _log_delete(self, workspace_id: str, state: WorkspaceState, ids: list[str]) -> None:
        return None

    async def _after_write(self, workspace_id: str, state: WorkspaceState) -> None:
        return None

    async def _ann_ready(self, workspace_id: str, state: WorkspaceState) -> None:
        """A background build gave `state` its approximate index (hook; called under the write lock)."""

    # ----- the approximate index -----

    async def _ensure_ann(self, workspace_id: str, state: WorkspaceState) -> None:
        """Give `state` its approximate index when it is big enough and has none: at once below `INLINE_ROWS` rows
        (only with `ann.min_rows` set that low), else built in the background while searches stay exact. Call with
        the workspace's write lock held (no write is under way, so the build's starting point is exact)."""
        min_rows = self.ann_params.min_rows
        if min_rows is None or state.size < min_rows or state.dim is None or self._closing:
            return
        if state.ann is not None or state.ann_dirty is not None:
            return
        if state.size < INLINE_ROWS:
            build = partial(AnnIndex.build, self.ann_params, state.matrix, state.size, lambda: False)
            state.ann = await state.gate.run_exclusive(build, inline=True)
            await self._ann_ready(workspace_id, state)
            return
        state.ann_dirty = set()
        task = asyncio.ensure_future(self._build_ann(workspace_id, state, state.matrix, state.size))
        self._ann_builds.add(task)
        task.add_done_callback(self._ann_builds.discard)

    async def _build_ann(
        self, workspace_id: str, state: WorkspaceState, matrix: NDArray[np.float32], rows: int
    ) -> None:
        def stop() -> bool:  # the store closes, or the workspace was replaced, dropped or let go of
            return self._closing or self._spaces.get(workspace_id) is not state

        try:
            started = time.perf_counter()
            ann = await AnnIndex.build_in_background(self.ann_params, matrix, rows, stop)
            if ann is None:
                return
            async with self._write_lock(workspace_id):
                if stop():
                    return
                await state.gate.run_exclusive(partial(state.attach_ann, ann), inline=False)
                logger.info(
                    "approximate index of workspace %r: %d rows in %.1f s", workspace_id, rows,
                    time.perf_counter() - started,
                )  # fmt: skip
                await self._ann_ready(workspace_id, state)
        except Exception:  # searches stay exact; the next write or load tries again
            logger.exception("building the approximate index of workspace %r failed", workspace_id)
        finally:
            if state.ann is None:
                state.ann_dirty = None

    async def close(self) -> None:
        """Stop background index builds (each stops within one batch), then the base's close."""
        self._closing = True
        if self._ann_builds:
            await asyncio.gather(*self._ann_builds, return_exceptions=True)
        await super().close()

    # ----- plumbing -----

    async def _open(self, workspace_id: str, *, create: bool) -> WorkspaceState | None:
        """The workspace's state, loading or creating it. Call with the workspace's write lock held."""
        state = self._spaces.get(workspace_id)
        if state is None:
            state = await self._load(workspace_id)
            if state is None and create:
                state = WorkspaceState()
                await self._persist_create(workspace_id, state)
            if state is not None:
                self._spaces[workspace_id] = state
        if state is not None:
            self._touch(workspace_id, state)
            await self._ensure_ann(workspace_id, state)
        return state

    async def _get(self, workspace_id: str) -> WorkspaceState | None:
        """The workspace's state for a read, loading it if needed; None when it does not exist."""
        state = self._spaces.get(workspace_id)
        if state is not None:
            self._touch(workspace_id, state)
            return state
        if not await self._exists_persisted(workspace_id):
            return None  # (an unknown id gets no lock: reads of made-up ids must not grow `_write_locks`)
        async with self._write_lock(workspace_id):
            return await self._open(workspace_id, create=False)

    def _touch(self, workspace_id: str, state: WorkspaceState) -> None:
        """`workspace_id` is being used (hook: a persistent store may let idle workspaces leave RAM)."""

    async def _prepare(self, workspace_id: str, nodes: Sequence[VectorNode], dim: int | None) -> Batch:
        """Validate, embed (one call) and normalise `nodes` against dimension `dim` (None: the first fixes it)."""
        if isinstance(nodes, PackedNodes):
            return await self._prepare_packed(workspace_id, nodes, dim)
        unique = latest_by_id(nodes)
        if not unique:
            return Batch([], np.empty((0, dim or 0), np.float32), dim)
        expected = batch_dimension(workspace_id, unique, dim, self.embedder.dimensions)
        missing = [i for i, node in enumerate(unique) if node.vector is None]
        embedded: NDArray[np.float32] | None = None
        if missing:
            embedded = await embed_checked(self.embedder, workspace_id, [unique[i].content for i in missing], expected)
        build = partial(_build_batch, workspace_id, unique, missing, embedded, expected)
        return build() if len(unique) < INLINE_ROWS else await asyncio.to_thread(build)

    async def _prepare_packed(self, workspace_id: str, packed: PackedNodes, dim: int | None) -> Batch:
        """`_prepare` for packed (vectorless) nodes: their rows are adopted as they are, not re-encoded. A large
        batch (a library load) is deduplicated and normalised in worker threads, not on the event loop."""
        small = len(packed.rows) < INLINE_ROWS
        unique = partial(_unique_rows, packed.rows, workspace_id)
        rows, texts = unique() if small else await asyncio.to_thread(unique)
        expected = dim if dim is not None else self.embedder.dimensions
        if not rows:
            return Batch([], np.empty((0, expected), np.float32), dim)
        vectors = await embed_checked(self.embedder, workspace_id, texts, expected)
        normalise = partial(_normalised_copy, vectors)
        return Batch(rows, normalise() if small else await asyncio.to_thread(normalise), expected)

    # ----- writes -----

    async def create_workspace(self, workspace_id: str) -> None:
        validate_workspace_id(workspace_id)
        if workspace_id not in self._spaces:
            await self._shielded(self._commit_create(workspace_id))

    async def _commit_create(self, workspace_id: str) -> None:
        async with self._write_lock(workspace_id):
            await self._open(workspace_id, create=True)

    async def delete_workspace(self, workspace_id: str) -> bool:
        validate_workspace_id(workspace_id)
        return await self._shielded(self._commit_drop(workspace_id))

    async def _commit_drop(self, workspace_id: str) -> bool:
        async with self._write_lock(workspace_id):
            existed = self._spaces.pop(workspace_id, None) is not None
            return await self._persist_drop(workspace_id) or existed

    async def upsert(self, workspace_id: str, nodes: Sequence[VectorNode]) -> int:
        validate_workspace_id(workspace_id)
        state = await self._get(workspace_id)
        if state is not None and state.size:  # refused before embedding; checked again under the write lock
            check_space(workspace_id, recorded_space(state.space, state.dim), self.space, "write to")
        batch = await self._prepare(workspace_id, nodes, state.dim if state is not None else None)
        batch.space = self.space
        return await self._shielded(self._commit_upsert(workspace_id, batch))

    async def _commit_upsert(self, workspace_id: str, batch: Batch) -> int:
        async with self._write_lock(workspace_id):
            state = await self._open(workspace_id, create=True)
            assert state is not None
            if batch.dim is None or not batch.nodes:
                return 0
            if state.size:
                check_space(workspace_id, recorded_space(state.space, state.dim), self.space, "write to")
            if state.dim is not None and state.dim != batch.dim:
                raise dimension_error(workspace_id, state.dim, batch.dim, "the batch's vectors")
            await self._log_upsert(workspace_id, state, batch)
            small = state.size < INLINE_ROWS and len(batch.nodes) < INLINE_ROWS
            needed = state.size + state.count_new(node.unique_id for node in batch.nodes)
            grow = partial(state.grown, needed, batch.dim)
            matrix = grow() if small else await asyncio.to_thread(grow)  # copying only reads: readers may run
            apply = partial(state.apply_upsert, batch.nodes, batch.vectors, dim=batch.dim, matrix=matrix)
            await state.gate.run_exclusive(apply, inline=len(batch.nodes) < INLINE_ROWS)
            state.space = batch.space  # logged with the batch: a workspace without a space adopts it atomically
            if state.nodes.should_compress():  # once, when the workspace grows past the threshold
                await state.gate.run_exclusive(state.nodes.compress, inline=False)
            await self._after_write(workspace_id, state)
            await self._ensure_ann(workspace_id, state)
        return len(batch.nodes)

    async def delete_ids(self, workspace_id: str, ids: Sequence[str]) -> int:
        validate_workspace_id(workspace_id)
        unique = list(dict.fromkeys(ids))
        if not unique or await self._get(workspace_id) is None:
            return 0
        return await self._shielded(self._commit_delete(workspace_id, unique))

    async def _commit_delete(self, workspace_id: str, ids: list[str]) -> int:
        async with self._write_lock(workspace_id):
            state = await self._open(workspace_id, create=False)
            present = [uid for uid in ids if uid in state.rows] if state is not None else []
            if state is None or not present:
                return 0
            await self._log_delete(workspace_id, state, present)
            delete = partial(state.apply_delete, present)
            deleted = await state.gate.run_exclusive(delete, inline=len(present) < INLINE_ROWS)
            await self._after_write(workspace_id, state)
        return deleted

    async def replace_workspace(self, workspace_id: str, nodes: Sequence[VectorNode]) -> int:
        validate_workspace_id(workspace_id)
        batch = await self._prepare(workspace_id, nodes, None)
        batch.space = self.space
        build = partial(WorkspaceState.build, batch)
        state = build() if len(batch.nodes) < INLINE_ROWS else await asyncio.to_thread(build)
        return await self._shielded(self._commit_replace(workspace_id, state))

    async def _commit_replace(self, workspace_id: str, state: WorkspaceState) -> int:
        async with self._write_lock(workspace_id):
            await self._persist_replace(workspace_id, state)
            self._spaces[workspace_id] = state  # readers still running keep the old state
            self._touch(workspace_id, state)
            await self._ensure_ann(workspace_id, state)  # a big load is searchable (exactly) before its index is built
        return state.size

    # ----- reads -----

    async def exists_workspace(self, workspace_id: str) -> bool:
        validate_workspace_id(workspace_id)
        return workspace_id in self._spaces or await self._exists_persisted(workspace_id)

    async def list_workspaces(self) -> list[str]:
        return sorted(set(self._spaces) | set(await self._list_persisted()))

    async def get(self, workspace_id: str, ids: Sequence[str]) -> list[VectorNode]:
        """The nodes that exist, in the order asked, with their vectors."""
        validate_workspace_id(workspace_id)
        state = await self._get(workspace_id)
        if state is None or not ids:
            return []
        return await state.gate.run_shared(partial(state.get, list(ids)), inline=len(ids) < INLINE_ROWS)

    async def search_vector(
        self,
        workspace_id: str,
        vector: QueryVector,
        *,
        top_k: int,
        filter: Filter | None = None,
        exact: bool = False,
    ) -> list[SearchHit]:
        validate_workspace_id(workspace_id)
        predicate = compile_stored_filter(filter)
        state = await self._get(workspace_id)
        if state is None or state.dim is None or state.size == 0 or top_k <= 0:
            return []
        check_space(workspace_id, recorded_space(state.space, state.dim), self.space, "search")
        query = as_query(vector, workspace_id, state.dim)
        return await self._counted(workspace_id, state, run_search(state, query, top_k, predicate, exact))

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
        validate_workspace_id(workspace_id)
        predicate = compile_stored_filter(filter)
        state = await self._get(workspace_id)
        if state is None or state.dim is None or state.size == 0 or top_k <= 0:
            return []
        check_space(workspace_id, recorded_space(state.space, state.dim), self.space, "search")
        dim = state.dim
        if vector is None:
            vector = (await self.embedder.embed([query]))[0]
            state = await self._get(workspace_id)  # the workspace may have been replaced while embedding
            if state is None or state.dim is None or state.size == 0:
                return []
            check_space(workspace_id, recorded_space(state.space, state.dim), self.space, "search")
            dim = state.dim
        query_vector = as_query(vector, workspace_id, dim)
        search = run_search(state, query_vector, top_k, predicate, exact, text=query, weight=lexical_weight)
        return await self._counted(workspace_id, state, search)

    async def _counted(
        self, workspace_id: str, state: WorkspaceState, search: Awaitable[list[SearchHit]]
    ) -> list[SearchHit]:
        """The hits of `search` (a `run_search` of `state`), then the workspace used again: the search may have
        built its int8 copy, its BM25 index or kept BM25 scores, which count in a persistent store's RAM estimate
        at once (`_touch`)."""
        hits = await search
        if self._spaces.get(workspace_id) is state:
            self._touch(workspace_id, state)
        return hits

    async def workspace_space(self, workspace_id: str) -> EmbeddingSpace | None:
        validate_workspace_id(workspace_id)
        state = await self._get(workspace_id)
        return recorded_space(state.space, state.dim) if state is not None and state.size else None

    async def list_ids(self, workspace_id: str) -> list[str]:
        """The ids alone, sorted, without decoding any node's metadata (the management API pages and exports by
        them); the sorted order is kept between calls until the set of ids changes."""
        validate_workspace_id(workspace_id)
        state = await self._get(workspace_id)
        if state is None or state.size == 0:
            return []
        return await state.gate.run_shared(state.sorted_ids, inline=state.size < INLINE_ROWS * 16)

    async def summarize(self, workspace_id: str) -> WorkspaceSummary:
        """From the stored metadata, without making a node, counted once and then kept up to date by the writes
        (`WorkspaceState.summarize`); a count of more than `OFF_LOOP_ITEMS` rows runs in a worker thread."""
        validate_workspace_id(workspace_id)
        state = await self._get(workspace_id)
        if state is None or state.size == 0:
            return WorkspaceSummary()
        inline = state.size <= OFF_LOOP_ITEMS or state.summary_kept()
        return await state.gate.run_shared(state.summarize, inline=inline)

    async def list_nodes(
        self, workspace_id: str, *, filter: Filter | None = None, with_vectors: bool = False
    ) -> list[VectorNode]:
        validate_workspace_id(workspace_id)
        predicate = compile_stored_filter(filter)
        state = await self._get(workspace_id)
        if state is None or state.size == 0:
            return []
        work = partial(state.export, predicate, with_vectors)
        return await state.gate.run_shared(work, inline=state.size < INLINE_ROWS)
