"""One workspace of the in-process stores in RAM (`WorkspaceState`): the rows, the nodes, and what is kept beside them.

A workspace is one contiguous float32 matrix with spare capacity (grown by 1.5x), the nodes (`node_table.NodeTable`:
per row the id and one blob of metadata JSON and content, compressed in big workspaces) in row order, and an
id -> row dict. Deleting swaps the last row into the hole, so the live rows stay contiguous and a search is one
matrix-vector product over `matrix[:size]` (`stores/inproc/search.py`). Listing must follow insertion order, which
the rows no longer do after a swap: the id -> row dict provides it, because a Python dict keeps insertion order,
keeps a key's place when its value (the row) is reassigned, and forgets a key in O(1). So a replaced node keeps its
original place, like a dict entry.

Beside the rows a workspace keeps, each built on first use and from then on maintained by `apply_upsert` /
`apply_delete`: the BM25 index of the node texts (`stores/lexical.py`, for hybrid search; O(terms) per node), the
int8 copy of the rows (`stores/inproc/quantized.py`, for exact scans of `QUANTIZED_FROM` rows or more), the
approximate index (`stores/inproc/ann.py`, big workspaces with `ann.min_rows` set) and the summary's tally. A
workspace never searched a way pays nothing for it on writes. A replaced or reloaded workspace is a new state whose
indexes are built lazily again.

Mutators run only under the exclusive side of the workspace's `gate` (`stores/inproc/gate.py`) or on a private
state; readers run under its shared side. Work over fewer than `INLINE_ROWS` rows runs inline on the event loop
(scoring 2,000 x 384 takes ~60 us, a filter ~0.15 us a node, far below a thread hop's cost), larger work in a
worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import orjson
from numpy.typing import NDArray

from reme_service.schema.vector_node import VectorNode
from reme_service.stores.inproc.ann import AnnIndex
from reme_service.stores.inproc.gate import Gate
from reme_service.stores.inproc.node_table import NodeTable
from reme_service.stores.inproc.packed import StoredFilter, StoredNode, export_node
from reme_service.stores.inproc.quantized import QuantizedRows
from reme_service.stores.lexical import LexicalIndex
from reme_service.stores.spaces import EmbeddingSpace
from reme_service.stores.summary import Tally, WorkspaceSummary

INLINE_ROWS = 2_000
QUANTIZED_FROM = 4_096  # rows from which an exact scan goes through the int8 copy first (`stores/inproc/quantized.py`)
_MIN_CAPACITY = 64
_GROWTH = 1.5


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
        self.gate = Gate()
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
