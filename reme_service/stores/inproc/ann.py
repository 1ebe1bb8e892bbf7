"""`AnnIndex`: the approximate nearest-neighbour index of a big in-process workspace (`memory` and `local` stores).

An HNSW graph (usearch) over a quantised copy of the workspace's rows (int8 by default: 384 bytes a row instead of
the matrix's 1,536). It only proposes candidates: `WorkspaceState` re-scores them exactly from its float32 matrix,
so a hit's score is the one an exact search gives. usearch was chosen by measurement (docs/scaling.md): at the
same ef it matched faiss-cpu's HNSW in speed and recall, and unlike faiss's HNSW it removes entries and quantises
to int8 natively, so deletes need no tombstones or rebuilds.

Keys. Graph keys are not rows: rows move (a delete swaps the last row into the hole) and a snapshot stores rows in
insertion order. Each row has a key (`row_keys`), each key its row (`key_rows`, -1 for a removed key); keys are
handed out in increasing order and never reused, so a delete moves no graph entry (the moved row keeps its key).

The index is a derived cache of the rows, never the truth. Its file (`save`/`load`) is stamped with the snapshot it
matches and carries a CRC-32 of its contents: a file of another snapshot, another configuration or damaged bytes is
not loaded (the caller rebuilds instead).
"""

from __future__ import annotations

import asyncio
import logging
import mmap
import os
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from pathlib import Path
from typing import TypeVar

import numpy as np

# onnxruntime (the local embedder's) is loaded before usearch, on purpose: usearch loads NumKong with RTLD_GLOBAL,
# whose exported copies of libstdc++'s symbols an onnxruntime loaded afterwards binds to, and crashes at import
# (onnxruntime 1.32, usearch 2.26, NumKong 7.8). Loaded first, onnxruntime binds the real libstdc++ at once.
import onnxruntime  # noqa: F401
import orjson
from numpy.typing import NDArray
from usearch.index import Index

from reme_service.durable import TMP_SUFFIX, atomic_write
from reme_service.stores.params import AnnParams

logger = logging.getLogger(__name__)
G = TypeVar("G", bound=np.generic)

ANN_FORMAT = "reme-ann-index"
ANN_VERSION = 1
NO_KEY = np.iinfo(np.uint64).max
BUILD_BATCH = 4_096  # rows added per call while building: a cancelled build stops within one batch
MIN_CANDIDATES = 40
BUILD_NICE = 10  # a background build runs this much nicer than the process (CFS weight 110 against 1024)
_CHUNK = 1 << 20


def _grown(array: NDArray[G], size: int, fill: int) -> NDArray[G]:
    """`array`, or a copy with room for at least `size` entries (the new ones `fill`)."""
    if size <= len(array):
        return array
    out = np.full(max(size, len(array) * 3 // 2, 64), fill, dtype=array.dtype)
    out[: len(array)] = array
    return out


class AnnIndex:
    """The graph of one workspace and its key <-> row maps. Mutators run where the workspace's rows change (under its
    gate's exclusive side); `candidates` may run in several threads at once."""

    __slots__ = ("params", "dim", "index", "row_keys", "key_rows", "count", "next_key", "_search_lock")

    def __init__(self, params: AnnParams, dim: int) -> None:
        self.params = params
        self.dim = dim
        self.index = Index(
            ndim=dim,
            metric="ip",
            dtype=params.dtype,
            connectivity=params.connectivity,
            expansion_add=params.expansion_add,
            expansion_search=params.expansion_search,
        )
        self.row_keys: NDArray[np.uint64] = np.empty(0, np.uint64)  # row -> key (NO_KEY: none)
        self.key_rows: NDArray[np.int64] = np.empty(0, np.int64)  # key -> row (-1: removed)
        self.count = 0  # the rows the index covers: 0 .. count - 1
        self.next_key = 0
        # usearch keeps per-thread search state by thread slot; searches of one index are serialised (each takes
        # well under a millisecond) rather than trusting two Python threads not to share a slot
        self._search_lock = threading.Lock()

    def __len__(self) -> int:
        return int(len(self.index))

    def memory_bytes(self) -> int:
        """The graph's bytes (usearch's count) and the key maps'."""
        return int(self.index.memory_usage) + self.row_keys.nbytes + self.key_rows.nbytes

    @classmethod
    def build(
        cls, params: AnnParams, matrix: NDArray[np.float32], rows: int, stop: Callable[[], bool]
    ) -> AnnIndex | None:
        """An index of `matrix[:rows]` (keys = rows), or None when `stop()` turned true between two batches."""
        ann = cls(params, int(matrix.shape[1]))
        for start in range(0, rows, BUILD_BATCH):
            if stop():
                return None
            end = min(rows, start + BUILD_BATCH)
            keys = np.arange(start, end, dtype=np.uint64)
            ann.index.add(keys, matrix[start:end], threads=params.build_threads)
        ann.row_keys = np.arange(rows, dtype=np.uint64)
        ann.key_rows = np.arange(rows, dtype=np.int64)
        ann.count = ann.next_key = rows
        return ann

    @classmethod
    async def build_in_background(
        cls, params: AnnParams, matrix: NDArray[np.float32], rows: int, stop: Callable[[], bool]
    ) -> AnnIndex | None:
        """`build` in a thread of its own at a lower CPU priority (`BUILD_NICE`): usearch's build threads inherit it,
        so a build takes the cores the requests leave idle instead of starving the event loop."""
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ann-build", initializer=_lower_priority)
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, cls.build, params, matrix, rows, stop)
        finally:
            pool.shutdown(wait=False)

    # ----- following the rows -----

    def _drop(self, rows: NDArray[np.intp]) -> None:
        keys = self.row_keys[rows]
        keys = keys[keys != NO_KEY]
        if len(keys):
            self.index.remove(keys)
            self.key_rows[keys.astype(np.int64)] = -1
        self.row_keys[rows] = NO_KEY

    def _add(self, rows: NDArray[np.intp], vectors: NDArray[np.float32]) -> None:
        if not len(rows):
            return
        keys = np.arange(self.next_key, self.next_key + len(rows), dtype=np.uint64)
        self.next_key += len(rows)
        self.key_rows = _grown(self.key_rows, self.next_key, -1)
        self.row_keys = _grown(self.row_keys, int(rows.max()) + 1, int(NO_KEY))
        self.index.add(keys, np.ascontiguousarray(vectors, dtype=np.float32), threads=1)
        self.row_keys[rows] = keys
        self.key_rows[keys.astype(np.int64)] = rows

    def upsert(self, rows: NDArray[np.intp], vectors: NDArray[np.float32]) -> None:
        """Rows `rows` (distinct; existing ones replaced, new ones appended) now hold `vectors`."""
        if not len(rows):
            return
        self._drop(rows[rows < self.count])
        self.count = max(self.count, int(rows.max()) + 1)
        self._add(rows, vectors)

    def delete(self, row: int, last: int) -> None:
        """Row `row` was deleted and the last row, `last`, moved into its place (when they differ)."""
        self._drop(np.asarray([row], np.intp))
        if row != last:
            key = self.row_keys[last]
            self.row_keys[row], self.row_keys[last] = key, NO_KEY
            if key != NO_KEY:
                self.key_rows[int(key)] = row
        self.count = last

    def resync(self, changed: Iterable[int], matrix: NDArray[np.float32], size: int) -> None:
        """Bring an index built from an earlier state of the rows up to date: every row in `changed` (written, moved
        or deleted since the build started) is re-read from `matrix`, as is every row appended past the build."""
        dirty = np.fromiter(changed, dtype=np.intp)
        covered = dirty[dirty < self.count]
        self._drop(covered)
        fresh = np.union1d(covered[covered < size], np.arange(self.count, size, dtype=np.intp))
        self.count = size
        self._add(fresh, matrix[fresh])

    # ----- searching -----

    def candidates(self, query: NDArray[np.float32], count: int) -> NDArray[np.intp]:
        """Up to `count` rows near `query` (approximately the nearest), unordered."""
        with self._search_lock:
            matches = self.index.search(query, count, threads=1)
        keys = np.asarray(matches.keys, dtype=np.uint64)[: len(matches)]
        rows = self.key_rows[keys.astype(np.int64)]
        return rows[rows >= 0].astype(np.intp)

    # ----- the file -----

    def save(self, path: Path, stamp: str, order: list[int]) -> None:
        """Write the index as `path`, stamped `stamp`; `order` lists the rows in the order the matching snapshot
        stores them (its row i is `order[i]`), so the file maps keys to snapshot positions."""
        if len(order) != self.count:
            raise ValueError(f"the index covers {self.count} rows, the snapshot {len(order)}")
        graph = path.with_name(path.name + ".graph" + TMP_SUFFIX)
        try:
            self.index.save(str(graph))
            keys = np.ascontiguousarray(self.row_keys[np.asarray(order, dtype=np.intp)], dtype="<u8")
            crc = zlib.crc32(keys.data)
            for chunk in _read_chunks(graph):
                crc = zlib.crc32(chunk, crc)
            header = {
                "format": ANN_FORMAT,
                "version": ANN_VERSION,
                "stamp": stamp,
                "count": self.count,
                "dim": self.dim,
                "config": _config(self.params),
                "next_key": self.next_key,
                "index_bytes": graph.stat().st_size,
                "crc32": crc,
            }
            first: list[bytes | memoryview] = [orjson.dumps(header) + b"\n", keys.tobytes()]
            atomic_write(path, chain(first, _read_chunks(graph)))
        finally:
            graph.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: Path, params: AnnParams, *, stamp: str, count: int, dim: int) -> AnnIndex | None:
        """The index saved in `path` if it was saved for snapshot `stamp` (`count` rows of dimension `dim`) with the
        same graph configuration and its bytes are intact; else None (why goes to the log)."""
        try:
            with open(path, "rb") as file:
                header = orjson.loads(file.readline())
                offset = file.tell()
                reason = _mismatch(header, params, stamp, count, dim)
                if reason is not None:
                    logger.info("approximate index %s not used: %s", path.name, reason)
                    return None
                with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                    return cls._from_bytes(mapped, offset, header, params, dim)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            logger.warning("approximate index %s not used: %s", path.name, exc)
            return None

    @classmethod
    def _from_bytes(
        cls, mapped: mmap.mmap, offset: int, header: dict[str, object], params: AnnParams, dim: int
    ) -> AnnIndex | None:
        count, index_bytes = int(str(header["count"])), int(str(header["index_bytes"]))
        end = offset + count * 8 + index_bytes
        if end != len(mapped):
            raise ValueError(f"{len(mapped)} bytes where the header says {end}")
        view = memoryview(mapped)
        try:
            if zlib.crc32(view[offset:end]) != header["crc32"]:
                raise ValueError("checksum mismatch")
            keys = np.frombuffer(view[offset : offset + count * 8], dtype="<u8").astype(np.uint64)
            ann = cls(params, dim)
            ann.index.load(view[offset + count * 8 : end])
        finally:
            view.release()
        next_key = int(str(header["next_key"]))
        if len(ann.index) != count or (count and int(keys.max()) >= next_key):
            raise ValueError(f"{len(ann.index)} entries for {count} rows")
        ann.row_keys, ann.count, ann.next_key = keys, count, next_key
        ann.key_rows = np.full(next_key, -1, np.int64)
        ann.key_rows[keys.astype(np.int64)] = np.arange(count, dtype=np.int64)
        return ann


def _lower_priority() -> None:
    """Raise this thread's nice value by `BUILD_NICE` (Linux: per thread, inherited by the threads it starts)."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + BUILD_NICE))
    except (AttributeError, OSError) as exc:  # no setpriority here: the build runs at the normal priority
        logger.debug("could not lower the priority of the index build: %s", exc)


def _config(params: AnnParams) -> dict[str, object]:
    """What the graph's file depends on (a change of these means a rebuild)."""
    return {"dtype": params.dtype, "connectivity": params.connectivity, "metric": "ip"}


def _mismatch(header: dict[str, object], params: AnnParams, stamp: str, count: int, dim: int) -> str | None:
    if header.get("format") != ANN_FORMAT or header.get("version") != ANN_VERSION:
        return "unknown format"
    if header.get("stamp") != stamp:
        return "saved for another snapshot"
    if header.get("count") != count or header.get("dim") != dim:
        return "saved for other rows"
    if header.get("config") != _config(params):
        return "saved with another configuration"
    return None


def _read_chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            yield chunk
