"""The write-ahead log of one workspace of the local store (`stores/inproc/local.py`), and its open descriptors.

`<ws>.wal`: a header line `{"op": "wal", "wal_id"}`, then one JSON line per upsert (`{"op": "upsert", "dim",
"space", "nodes", "vectors"}`, vectors as base64 of float32 bytes) or delete (`{"op": "delete", "ids"}`), written
and fsynced before the call returns and before RAM changes. One line per call, so a batch is either wholly in the
log or not at all. A log is replayed only onto the snapshot whose `wal_id` its header carries; a torn last line (no
newline, or not a valid record) is dropped and truncated away; a bad line followed by good ones is corruption
(`StoreError`).

Open files: a log is appended to through an `O_APPEND` descriptor kept open between writes, but at most
`max_open_files` of them are open at once, whatever the number of workspaces (`Handles`, least recently used
closed first). Every append is fsynced before it returns, so closing a descriptor loses nothing; a closed log is
reopened, in append mode, by its next write.
"""

from __future__ import annotations

import base64
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from reme_service.durable import append_synced, atomic_write, truncate_synced
from reme_service.errors import StoreError
from reme_service.stores.inproc.packed import StoredNode
from reme_service.stores.inproc.snapshot import RECORD_ERRORS, encode_node
from reme_service.stores.inproc.workspace import Batch, WorkspaceState
from reme_service.stores.spaces import parse_space


@dataclass(slots=True, eq=False)  # compared and hashed by identity: a key of `Handles`
class Wal:
    """The log of one loaded workspace."""

    path: Path
    snapshot_id: str  # the wal_id of the snapshot on disk; the log's header must carry it
    ready: bool = False  # the file starts with that header and ends with a whole line
    needs_snapshot: bool = False  # a failed append could not be undone: compact before appending again
    fd: int | None = None  # owned by `Handles`: opened, closed and evicted there only
    size: int = 0
    records: int = 0


class Handles:
    """The open log descriptors of one store: at most `limit` open, the least recently used closed first.

    A log in use (an append in a worker thread, between `use` and its end) is never closed by another thread's
    eviction; if more than `limit` are in use at once (more concurrent appends than the limit), the excess is
    closed as soon as they end. All opening and closing happens under one lock, so a descriptor is never closed
    twice nor used after its number was reused.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._open: OrderedDict[Wal, None] = OrderedDict()  # least recently used first
        self._in_use: set[Wal] = set()

    @contextmanager
    def use(self, wal: Wal) -> Iterator[int]:
        """The log's descriptor (opened in append mode if it is closed), reserved for the caller until the end."""
        with self._lock:
            if wal.fd is None:
                self._evict(self.limit - 1)
                wal.fd = os.open(wal.path, os.O_WRONLY | os.O_APPEND)
            self._open[wal] = None
            self._open.move_to_end(wal)
            self._in_use.add(wal)
        try:
            yield wal.fd
        finally:
            with self._lock:
                self._in_use.discard(wal)
                self._evict(self.limit)

    def close(self, wal: Wal) -> None:
        """Close the log's descriptor, if open (the caller holds the workspace's write lock: it is not in use)."""
        with self._lock:
            self._open.pop(wal, None)
            self._close(wal)

    def close_all(self) -> None:
        with self._lock:
            for wal in list(self._open):
                self._close(wal)
            self._open.clear()

    def __len__(self) -> int:
        return len(self._open)

    def _evict(self, keep: int) -> None:
        """Close least recently used logs not in use until at most `keep` are open (or only logs in use are)."""
        for wal in list(self._open):
            if len(self._open) <= keep:
                return
            if wal not in self._in_use:
                del self._open[wal]
                self._close(wal)

    @staticmethod
    def _close(wal: Wal) -> None:
        if wal.fd is not None:
            fd, wal.fd = wal.fd, None
            os.close(fd)


def apply_record(state: WorkspaceState, record: dict[str, Any], workspace_id: str) -> None:
    """Replay one log record; raises one of RECORD_ERRORS (before changing anything) if it is malformed."""
    if record["op"] == "delete":
        state.apply_delete([str(uid) for uid in record["ids"]])
        return
    if record["op"] != "upsert":
        raise ValueError(f"unknown record {record['op']!r}")
    dim, items = int(record["dim"]), record["nodes"]
    raw = np.frombuffer(base64.b64decode(record["vectors"], validate=True), dtype="<f4")
    vectors = raw.reshape(len(items), dim).astype(np.float32)
    nodes = [StoredNode.encode(str(it["id"]), workspace_id, it["content"], it["metadata"]) for it in items]
    if state.dim is not None and state.dim != dim:
        raise ValueError(f"a record of dimension {dim} in a workspace of dimension {state.dim}")
    needed = state.size + state.count_new(node.unique_id for node in nodes)
    state.apply_upsert(nodes, vectors, dim=dim, matrix=state.grown(needed, dim))
    state.space = parse_space(record.get("space")) or state.space


def replay(wal: Wal, state: WorkspaceState, workspace_id: str) -> None:
    """Apply the log to a freshly loaded snapshot, dropping (and truncating) a torn last line."""
    try:
        data = wal.path.read_bytes()
    except FileNotFoundError:
        return
    pos = records = 0
    while (end := data.find(b"\n", pos)) >= 0:
        try:
            record = orjson.loads(data[pos:end])
            if pos == 0:
                if record.get("op") != "wal" or record.get("wal_id") != wal.snapshot_id:
                    return  # a stale log: already in the snapshot, or from an older workspace
            else:
                apply_record(state, record, workspace_id)
                records += 1
        except RECORD_ERRORS as exc:
            if data.find(b"\n", end + 1) >= 0:
                raise StoreError(f"write-ahead log {wal.path} is corrupt at byte {pos}: {exc}") from exc
            break  # the torn last line of an interrupted append
        pos = end + 1
    if pos == 0:
        return  # not even a header: reset before the next append
    if pos < len(data):
        truncate_synced(wal.path, pos)
    wal.ready, wal.size, wal.records = True, pos, records


def reset_wal(wal: Wal, handles: Handles) -> None:
    """Replace the log by an empty one for the current snapshot."""
    handles.close(wal)
    header = orjson.dumps({"op": "wal", "wal_id": wal.snapshot_id}) + b"\n"
    atomic_write(wal.path, [header])
    wal.ready, wal.size, wal.records = True, len(header), 0


def append(wal: Wal, handles: Handles, encode: Callable[[], bytes]) -> None:
    """Append one record and fsync it; on failure undo the partial line (or demand a compaction)."""
    data = encode()
    try:
        with handles.use(wal) as fd:
            try:
                append_synced(fd, data)
            except OSError:
                if not _truncate_back(fd, wal.size):
                    wal.needs_snapshot = True
                raise
    except OSError as exc:  # the open failed (nothing written), or the append did (cut back above)
        raise StoreError(f"could not append to {wal.path}: {exc}") from exc
    wal.size += len(data)
    wal.records += 1


def _truncate_back(fd: int, size: int) -> bool:
    """Cut a failed append off the log; False when that is impossible (the log must then be rewritten)."""
    try:
        truncate_synced(fd, size)
    except OSError:
        return False
    return True


def encode_upsert(batch: Batch) -> bytes:
    record = {
        "op": "upsert",
        "dim": batch.dim,
        "space": batch.space.model_dump() if batch.space is not None else None,
        "nodes": [orjson.Fragment(encode_node(node)) for node in batch.nodes],
        "vectors": base64.b64encode(np.ascontiguousarray(batch.vectors, dtype="<f4").tobytes()).decode(),
    }
    return orjson.dumps(record) + b"\n"
