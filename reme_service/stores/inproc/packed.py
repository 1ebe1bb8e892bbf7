"""Nodes as the in-process stores hold them: compact rows whose metadata is kept as JSON bytes.

A typical task memory's metadata as a Python dict costs ~1.2 KB (the dict, one object per value, nested
containers); the same metadata as orjson bytes is ~400 bytes in one object. At 100k memories that is ~115 MiB
against ~40 MiB, and one object per node instead of about fifteen leaves the allocator far less to fragment
(measured: the in-process growth for a 100k library fell from 2.9x to under 2x the raw vectors).

Reading metadata decodes it. `export_node` decodes once per node handed out (the dict layout made a deep copy
there instead, at about the same cost). Filters decode each node they test, once however many conditions the
filter has, with a shortcut: `metadata.<path> == "<text>"` can only hold when the JSON form of "<text>" occurs
in the bytes (orjson writes a given string the same way wherever it stands), so a node without it is rejected
by one substring search (~50 ns) instead of a decode (~1.5 us).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np
import orjson
from numpy.typing import NDArray

from reme_service.errors import InvalidRequestError
from reme_service.schema.vector_node import VectorNode, trusted_node
from reme_service.stores.filters import compile_conditions, parse_filter


def compact_bytes(data: bytes) -> bytes:
    """A right-sized copy of `data`. orjson serialises into a buffer of several KB and hands that buffer out
    as the bytes object: 100k metadata blobs of ~400 bytes straight from `orjson.dumps` held ~390 MiB of RSS,
    copies of them 41 MiB. Anything kept long-term goes through here."""
    return bytes(memoryview(data))


class StoredNode:
    """A node without its vector (that lives in the workspace's matrix), in slots, metadata as JSON bytes.
    Never handed out: `export_node` makes a `VectorNode` a caller may mutate freely."""

    __slots__ = ("unique_id", "workspace_id", "content", "meta")

    def __init__(self, unique_id: str, workspace_id: str, content: str, meta: bytes) -> None:
        self.unique_id = unique_id
        self.workspace_id = workspace_id
        self.content = content
        self.meta = meta

    @classmethod
    def encode(cls, unique_id: str, workspace_id: str, content: str, metadata: Any) -> StoredNode:
        """A stored node from dict metadata; InvalidRequestError when it is not JSON-serialisable."""
        try:
            meta = orjson.dumps(metadata)
        except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
            raise InvalidRequestError(f"the metadata of {unique_id!r} is not JSON-serialisable: {exc}") from exc
        return cls(unique_id, workspace_id, content, compact_bytes(meta))


def export_node(node: StoredNode, vector: NDArray[np.float32] | None = None) -> VectorNode:
    """A copy of a stored node for a caller."""
    return trusted_node(node.unique_id, node.workspace_id, node.content, orjson.loads(node.meta), vector)


class PackedNodes(Sequence[VectorNode]):
    """Vectorless nodes kept as stored nodes until someone needs `VectorNode`s, which are then made one at a
    time. A library load builds one line by line, so each line's parsing garbage is freed before the next line
    reuses it and the kept rows sit densely in memory; the in-process stores adopt the rows as they are. (Built
    as a list of `VectorNode`s first, the 100k-memory library left ~170 MiB of allocator pages pinned by the
    few kept objects scattered among freed ones.)"""

    __slots__ = ("rows",)

    def __init__(self, rows: list[StoredNode]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> VectorNode: ...

    @overload
    def __getitem__(self, index: slice) -> list[VectorNode]: ...

    def __getitem__(self, index: int | slice) -> VectorNode | list[VectorNode]:
        if isinstance(index, slice):
            return [export_node(row) for row in self.rows[index]]
        return export_node(self.rows[index])

    def __iter__(self) -> Iterator[VectorNode]:
        return map(export_node, self.rows)


def pack_nodes(nodes: Iterable[VectorNode], workspace_id: str) -> Sequence[VectorNode]:
    """Vectorless nodes of `workspace_id`, packed one by one as `nodes` yields them (so a generator's per-node
    garbage is freed before the next node is made). Hand the result to `upsert` or `replace_workspace`: every
    store reads it as a sequence of `VectorNode`s, and the in-process stores adopt its rows without re-encoding."""
    return PackedNodes([StoredNode.encode(n.unique_id, workspace_id, n.content, n.metadata) for n in nodes])


class _Decoded:
    """A stored node with its metadata decoded once, for the conditions of one filter."""

    __slots__ = ("unique_id", "workspace_id", "content", "metadata")

    def __init__(self, unique_id: str, workspace_id: str, content: str, meta: bytes) -> None:
        self.unique_id = unique_id
        self.workspace_id = workspace_id
        self.content = content
        self.metadata = orjson.loads(meta)


class StoredFilter:
    """A compiled filter for stored nodes (`compile_stored_filter`). `needles`: byte strings every matching node's
    metadata JSON contains (the string-equality shortcut of the module docstring); `match` tests a node whose
    needles were already found (given as its parts), `__call__` any node."""

    __slots__ = ("needles", "_predicate", "_decode")

    def __init__(self, predicate: Callable[[Any], bool], needles: tuple[bytes, ...], decode: bool) -> None:
        self.needles = needles
        self._predicate = predicate
        self._decode = decode  # a condition reads metadata: decode it (once) for the conditions

    def match(self, unique_id: str, workspace_id: str, content: str, meta: bytes) -> bool:
        """The test of a node, given as its parts, whose needles were found."""
        if self._decode:
            return self._predicate(_Decoded(unique_id, workspace_id, content, meta))
        return self._predicate(StoredNode(unique_id, workspace_id, content, meta))

    def __call__(self, node: StoredNode) -> bool:
        meta = node.meta
        for needle in self.needles:
            if needle not in meta:
                return False
        return self.match(node.unique_id, node.workspace_id, node.content, node.meta)


def compile_stored_filter(filter: Mapping[str, Any] | None) -> StoredFilter | None:
    """`filters.compile_filter` for stored nodes: decodes a node's metadata once per test, and only after the
    string-equality shortcut (module docstring) let it through. None when the filter is empty."""
    conditions = parse_filter(filter)
    predicate = compile_conditions(conditions)
    if predicate is None:
        return None
    # Conditions on root fields only read plain attributes of a stored node: nothing to decode.
    decode = any(condition.path[0] == "metadata" for condition in conditions)
    needles = tuple(
        orjson.dumps(condition.operand)
        for condition in conditions
        if condition.op == "eq" and isinstance(condition.operand, str) and condition.path[0] == "metadata"
    )
    return StoredFilter(predicate, needles, decode)
