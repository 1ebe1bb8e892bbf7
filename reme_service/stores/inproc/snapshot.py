"""The snapshot of one workspace of the local store (`stores/inproc/local.py`): its format, written and read.

`<ws>.snap`, always replaced whole (`durable.atomic_write`): a JSON header line `{"format", "version", "dim",
"space", "count", "nodes_bytes", "wal_id", "workspace_id"}` (`space`: the workspace's embedding space,
`stores/spaces.py`; absent in older snapshots), then `nodes_bytes` of JSON lines `{"id", "content", "metadata"}` in
insertion order, then `count x dim` little-endian float32 (the vectors, same order), read straight into the matrix.
One file, so one rename commits nodes and vectors. Node metadata is kept as JSON bytes (`stores/inproc/packed.py`)
and goes in as it is (`orjson.Fragment`); a snapshot is read one line at a time, so its parsing garbage is reused
line after line instead of pinning allocator pages.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import orjson

from reme_service.errors import StoreError
from reme_service.stores.inproc.node_table import NodeTable
from reme_service.stores.inproc.packed import StoredNode
from reme_service.stores.inproc.workspace import WorkspaceState
from reme_service.stores.spaces import parse_space

SNAPSHOT_FORMAT = "reme-local-snapshot"
SNAPSHOT_VERSION = 1
RECORD_ERRORS = (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError)


def encode_node(node: StoredNode) -> bytes:
    """A node's JSON line (without the newline); its metadata is already JSON and goes in as it is."""
    return orjson.dumps({"id": node.unique_id, "content": node.content, "metadata": orjson.Fragment(node.meta)})


def decode_node(line: bytes | memoryview, workspace_id: str) -> StoredNode:
    item = orjson.loads(line)  # one line at a time: the parse garbage is reused by the next line, not left behind
    return StoredNode.encode(str(item["id"]), workspace_id, item["content"], item["metadata"])


def snapshot_chunks(state: WorkspaceState, wal_id: str, workspace_id: str) -> list[bytes | memoryview]:
    """The snapshot's bytes. Only reads `state` (the caller holds the write lock)."""
    order = list(state.rows.values())
    nodes = state.nodes
    blob = bytearray()
    for row in order:
        blob += encode_node(nodes[row])
        blob += b"\n"
    vectors = np.ascontiguousarray(state.matrix[order], dtype="<f4") if state.dim else np.empty(0, "<f4")
    header = {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "dim": state.dim,
        "space": state.space.model_dump() if state.space is not None else None,
        "count": len(order),
        "nodes_bytes": len(blob),
        "wal_id": wal_id,
        "workspace_id": workspace_id,  # the id itself: a long id's file name is a hash of it
    }
    return [orjson.dumps(header) + b"\n", memoryview(blob), vectors.reshape(-1).view(np.uint8).data]


def header_workspace(path: Path) -> str | None:
    """The workspace id a snapshot's header names (None for an older snapshot without one, or an unreadable file)."""
    try:
        with open(path, "rb") as file:
            value = orjson.loads(file.readline()).get("workspace_id")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def read_snapshot(path: Path, workspace_id: str) -> tuple[WorkspaceState, str]:
    """Load a snapshot; FileNotFoundError when there is none."""
    with open(path, "rb") as file:
        try:
            header = orjson.loads(file.readline())
            if header["format"] != SNAPSHOT_FORMAT or header["version"] != SNAPSHOT_VERSION:
                raise ValueError(f"unsupported snapshot format {header['format']!r} v{header['version']}")
            dim, count, wal_id = header["dim"], int(header["count"]), str(header["wal_id"])
            blob = file.read(int(header["nodes_bytes"]))
            matrix = np.empty((count + count // 4 + 16, dim or 0), np.float32)
            expected = count * (dim or 0) * 4
            view = matrix[:count].reshape(-1).view(np.uint8).data  # the rows' bytes, written in place
            got = 0
            while got < expected and (read := file.readinto(view[got:])):
                got += read
            if got != expected:
                raise ValueError(f"truncated vectors: {got} of {expected} bytes")
            ends = np.flatnonzero(np.frombuffer(blob, np.uint8) == ord("\n"))[:count]
            if len(ends) != count:
                raise ValueError(f"{len(ends)} nodes for a count of {count}")
            starts = np.concatenate(([0], ends[:-1] + 1)) if count else ends
            lines = memoryview(blob)

            def line(row: int) -> StoredNode:
                return decode_node(lines[int(starts[row]) : int(ends[row])], workspace_id)

            nodes = NodeTable.planned(count, lambda rows: map(line, rows))
            nodes.extend(map(line, range(count)))
        except RECORD_ERRORS as exc:
            raise StoreError(f"snapshot {path.name} is corrupt: {exc}") from exc
    if sys.byteorder != "little":
        matrix[:count].byteswap(inplace=True)
    state = WorkspaceState(dim, matrix, parse_space(header.get("space")))
    state.nodes = nodes
    state.rows = {uid: row for row, uid in enumerate(nodes.ids)}
    return state, wal_id
