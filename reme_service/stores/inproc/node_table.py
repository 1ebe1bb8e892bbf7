"""`NodeTable`: the nodes of one in-process workspace, in row order, one bytes object a node.

The matrix holds the vectors; the table holds the rest. A row is its id (a `str`, the same object the workspace's
id -> row dict has as its key, so it is stored once) and one blob: the metadata's JSON bytes and the content's UTF-8
behind a 4-byte length. A `StoredNode` is made only when someone reads a row (a search hit, a listing, a filter
test), so a resident node costs two list slots, its id and its blob instead of four objects (measured at 100k task
memories of the benchmark library: 866 bytes a node as `StoredNode`s, 727 as raw blobs).

A table of at least `COMPRESS_FROM` nodes keeps its blobs compressed: zstd with a dictionary trained on a sample of
its own nodes (`NodeCodec`). Memories of one workspace repeat their metadata keys, their ids' and times' shapes and
much of their wording, which a per-node compressor without a dictionary cannot exploit (a 500-byte node has too
little context of its own). Measured on the benchmark library's task memories: 512 bytes -> 75 (templated text, so
the best case); ~3 us to compress a node, ~1.2 us to read one back. The dictionary lives with the table in RAM only
(the snapshot and the log hold plain JSON), so a reload trains a fresh one. A table that grows past the threshold by
writes is re-encoded once (`compress`, under the workspace's exclusive gate); its later writes use the same
dictionary, so a workspace whose texts drift far from its sample compresses less well, never wrongly.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import orjson
import zstandard

from reme_service.schema.vector_node import SearchHit, trusted_search_hit
from reme_service.stores.inproc.packed import StoredFilter, StoredNode, compact_bytes

COMPRESS_FROM = 50_000  # nodes: below this a table keeps raw blobs (nothing to decode on a read)
DICTIONARY_BYTES = 16_384
TRAINING_SAMPLES = 4_000
LEVEL = 3  # level 9 saves ~4 % more at ~5x the cost of a write
_LENGTH = 4


def _raw(content: str, meta: bytes) -> bytes:
    return len(meta).to_bytes(_LENGTH, "little") + meta + content.encode()


def _split(raw: bytes) -> tuple[str, bytes]:
    end = _LENGTH + int.from_bytes(raw[:_LENGTH], "little")
    return raw[end:].decode(), raw[_LENGTH:end]


def _meta(raw: bytes) -> memoryview:
    """The metadata JSON of a raw row, without copying it or decoding the content."""
    return memoryview(raw)[_LENGTH : _LENGTH + int.from_bytes(raw[:_LENGTH], "little")]


class NodeCodec:
    """How one table's blobs are encoded: raw, or zstd with the table's own dictionary. A compressor serves one
    writer at a time (writes to a workspace are serialised); readers run in several threads, each with its own
    decompressor."""

    __slots__ = ("compressing", "dictionary", "_compressor", "_local")

    def __init__(self, *, compressing: bool = False, dictionary: zstandard.ZstdCompressionDict | None = None) -> None:
        self.compressing = compressing
        self.dictionary = dictionary
        self._compressor = (
            zstandard.ZstdCompressor(
                level=LEVEL, dict_data=dictionary, write_checksum=False, write_content_size=True, write_dict_id=False
            )
            if compressing
            else None
        )
        self._local = threading.local()

    @classmethod
    def trained(cls, samples: Sequence[bytes]) -> NodeCodec:
        """A compressing codec with a dictionary trained on raw blobs `samples`; without a dictionary when zstd
        cannot train one on them (too few, too small, all alike)."""
        try:
            return cls(compressing=True, dictionary=zstandard.train_dictionary(DICTIONARY_BYTES, list(samples)))
        except zstandard.ZstdError:
            return cls(compressing=True)

    def nbytes(self) -> int:
        return len(self.dictionary.as_bytes()) if self.dictionary is not None else 0

    def encode(self, raw: bytes) -> bytes:
        # zstd hands out its output buffer (sized for the worst case, past pymalloc's small-object limit) shrunk in
        # place: kept, those scatter over the C heap and pin its pages; a right-sized copy does not
        return raw if self._compressor is None else compact_bytes(self._compressor.compress(raw))

    def decode(self, blob: bytes) -> bytes:
        if not self.compressing:
            return blob
        decompressor = getattr(self._local, "decompressor", None)
        if decompressor is None:
            decompressor = self._local.decompressor = zstandard.ZstdDecompressor(dict_data=self.dictionary)
        data: bytes = decompressor.decompress(blob)
        return data


class NodeTable:
    """Row -> node of one workspace (module docstring). Mutators run where the workspace's rows change (under its
    gate's exclusive side); reads may run in several threads at once."""

    __slots__ = ("workspace_id", "ids", "blobs", "codec")

    def __init__(self) -> None:
        self.workspace_id = ""  # every node of a workspace carries its id; set by the first node stored
        self.ids: list[str] = []
        self.blobs: list[bytes] = []
        self.codec = NodeCodec()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, row: int) -> StoredNode:
        content, meta = _split(self.codec.decode(self.blobs[row]))
        return StoredNode(self.ids[row], self.workspace_id, content, meta)

    def __iter__(self) -> Iterator[StoredNode]:
        return map(self.__getitem__, range(len(self.ids)))

    def hits(self, rows: Sequence[int], scores: Sequence[float]) -> list[SearchHit]:
        """Search hits of `rows` with their `scores`, each node made straight from its blob (a search builds one per
        candidate of the rescoring pool, so this skips the `StoredNode` step and the per-field model checks)."""
        ids, blobs, workspace_id, loads = self.ids, self.blobs, self.workspace_id, orjson.loads
        decode = self.codec.decode if self.codec.compressing else None
        found: list[SearchHit] = []
        for row, score in zip(rows, scores, strict=True):
            raw = blobs[row] if decode is None else decode(blobs[row])
            end = _LENGTH + int.from_bytes(raw[:_LENGTH], "little")  # `_split`, inline: one call a hit, not three
            found.append(trusted_search_hit(ids[row], workspace_id, raw[end:].decode(), loads(raw[_LENGTH:end]), score))
        return found

    def metadata(self, row: int) -> Any:
        """Row `row`'s metadata, decoded (no node is made)."""
        return orjson.loads(_meta(self.codec.decode(self.blobs[row])))

    def metadatas(self) -> Iterator[Any]:
        """Every row's metadata, decoded one at a time in row order, straight from the blobs (no node is made): what
        a summary of the workspace counts (~2 us a row raw, ~3 compressed, against ~13 to make a `VectorNode`)."""
        loads, decode = orjson.loads, self.codec.decode if self.codec.compressing else None
        for blob in self.blobs:
            yield loads(_meta(blob if decode is None else decode(blob)))

    def content(self, row: int) -> str:
        return _split(self.codec.decode(self.blobs[row]))[0]

    def contents(self) -> Iterator[str]:
        return map(self.content, range(len(self.ids)))

    def tester(self, predicate: StoredFilter) -> Callable[[int], bool]:
        """`predicate` as a test of a row. A row whose blob lacks one of the filter's needles (bytes that every match's
        metadata contains) is rejected before a node is made of it; a needle found in the content instead only lets
        the row through to the full test."""
        needles, ids, blobs, decode, match = predicate.needles, self.ids, self.blobs, self.codec.decode, predicate.match
        workspace_id = self.workspace_id

        def test(row: int) -> bool:
            raw = decode(blobs[row])
            for needle in needles:
                if needle not in raw:
                    return False
            end = _LENGTH + int.from_bytes(raw[:_LENGTH], "little")
            return match(ids[row], workspace_id, raw[end:].decode(), raw[_LENGTH:end])

        return test

    def append(self, node: StoredNode) -> None:
        self.workspace_id = node.workspace_id
        self.ids.append(node.unique_id)
        self.blobs.append(self.codec.encode(_raw(node.content, node.meta)))

    def extend(self, nodes: Iterable[StoredNode]) -> None:
        for node in nodes:
            self.append(node)

    def replace(self, row: int, node: StoredNode) -> None:
        """Row `row` (of the same id) now holds `node`. The id object stays: the id -> row dict keys it."""
        self.blobs[row] = self.codec.encode(_raw(node.content, node.meta))

    def delete(self, row: int) -> str | None:
        """Remove row `row`, moving the last row into its place; the moved row's id, or None when `row` was last."""
        ids, blobs = self.ids, self.blobs
        moved_id, moved_blob = ids.pop(), blobs.pop()
        if row == len(ids):
            return None
        ids[row], blobs[row] = moved_id, moved_blob
        return moved_id

    @classmethod
    def planned(cls, count: int, sample: Callable[[Sequence[int]], Iterable[StoredNode]]) -> NodeTable:
        """An empty table for `count` nodes, compressing from the start when that is at least `COMPRESS_FROM`,
        trained on `sample(rows)`, the nodes at a spread of positions: a big load never holds a raw copy of every
        node."""
        table = cls()
        if count >= COMPRESS_FROM:
            rows = range(0, count, max(1, count // TRAINING_SAMPLES))[:TRAINING_SAMPLES]
            table.codec = NodeCodec.trained([_raw(node.content, node.meta) for node in sample(rows)])
        return table

    def should_compress(self) -> bool:
        return not self.codec.compressing and len(self.ids) >= COMPRESS_FROM

    def compress(self) -> None:
        """Re-encode every row with a dictionary trained on a sample of them (once the table is big enough). Each
        raw blob is freed as its compressed one replaces it, so this needs no second copy of the table."""
        if not self.should_compress():
            return
        blobs = self.blobs
        step = max(1, len(blobs) // TRAINING_SAMPLES)
        codec = NodeCodec.trained(blobs[::step][:TRAINING_SAMPLES])
        for row, raw in enumerate(blobs):
            blobs[row] = codec.encode(raw)
        self.codec = codec

    def bytes_per_row(self, sample: int) -> float:
        """The average size of a sample of `sample` rows (the id's and the blob's objects) and the codec's share."""
        count = len(self.ids)
        if not count:
            return 0.0
        step = max(1, count // sample)
        rows = range(0, count, step)[:sample]
        total = sum(sys.getsizeof(self.ids[row]) + sys.getsizeof(self.blobs[row]) for row in rows)
        return total / len(rows) + self.codec.nbytes() / count
