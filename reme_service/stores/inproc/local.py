"""The durable local vector store (backend "local"): the in-RAM engine plus a snapshot and a log per workspace.

Files in `store_dir` for a workspace `<ws>`: `<ws>.snap`, the snapshot (`stores/inproc/snapshot.py`), always
replaced whole (`durable.atomic_write`: temp file, fsync, rename, fsync of the directory; every fsync of this store is
in `reme_service/durable.py`); `<ws>.wal`, the write-ahead log (`stores/inproc/wal.py`), written and fsynced before
a write returns and before RAM changes; `<ws>.ann`, the approximate index, a cache saved beside the snapshot.

Recovery loads the snapshot and replays the log only when the log's `wal_id` is the snapshot's. Every snapshot
gets a fresh random id, so a log already folded into a newer snapshot (a crash between the two steps of a
compaction), or left behind by a deleted workspace, is never replayed. At most `max_open_files` logs are open at
once (`wal.Handles`).

RAM: workspaces load lazily on first use and stay while the store's estimated resident bytes are within
`max_resident_mb`; past it, idle workspaces leave RAM, least recently used first (`ResidentSet`,
`LocalFiles.touch`), and load again from their snapshot and log on their next use.

Compaction (new snapshot, then a fresh log) runs when a log passes `compact_after_records` records or
`compact_after_bytes` bytes, and on `close()`. Workspaces load lazily on first access; `list_workspaces` only
scans file names. All file I/O runs in worker threads, under the workspace's write lock.

Memory: node metadata goes into the snapshot and the log as the JSON bytes it is kept as. Encoding the snapshot of
a large workspace still frees tens of MB of buffers into the worker thread's malloc arena, which glibc keeps; after
a snapshot of at least `TRIM_AFTER_NODES` nodes, and after loading one, the store asks glibc to return free memory
to the OS (`malloc_trim`; a no-op elsewhere): opening a 1M-memory workspace left ~490 MiB of freed parsing
buffers resident without it. Loading a 100k-memory library over HTTP: the server's RSS grows by ~210 MiB, 146 MiB
of it the vectors (it was ~490 MiB with dict metadata and no trim).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import orjson

from reme_service.durable import TMP_SUFFIX, atomic_write, fsync_path
from reme_service.errors import StoreError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.workspace_ids import (
    HASH_MARK,
    WorkspaceId,
    file_name,
    validate_workspace_id,
    workspace_from_file_name,
)
from reme_service.stores.inproc.ann import AnnIndex
from reme_service.stores.inproc.memory import MemoryVectorStore
from reme_service.stores.inproc.resident import ResidentSet
from reme_service.stores.inproc.snapshot import header_workspace, read_snapshot, snapshot_chunks
from reme_service.stores.inproc.wal import Handles, Wal, append, encode_upsert, replay, reset_wal
from reme_service.stores.inproc.workspace import Batch, WorkspaceState
from reme_service.stores.params import LocalStoreParams, MemoryStoreParams

T = TypeVar("T")

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snap"
WAL_SUFFIX = ".wal"
ANN_SUFFIX = ".ann"
TRIM_AFTER_NODES = 10_000


def _malloc_trim() -> Callable[[], int] | None:
    """glibc's `malloc_trim(0)` (return free heap memory to the OS), or None without glibc."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return partial(trim, 0)


def _lock_dir(store_dir: Path) -> int | None:
    """Hold an exclusive lock on `<store_dir>/.lock` (the open descriptor is returned and kept until `close`).
    Each process keeps its own copy of the workspaces in RAM, so a second process writing the same files would
    overwrite the first one's snapshots; it is refused at start instead. None where `fcntl` does not exist."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        return None
    fd = os.open(store_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(
            f"the local store in {store_dir} is in use by another process; it belongs to one process at a time "
            "(run several service processes on a Chroma server instead: docs/scaling.md)"
        ) from None
    return fd


class LocalFiles:
    """The persistence of backend "local" (`stores/inproc/persistence.py`): a snapshot and a write-ahead log per
    workspace under `store_dir`, and the choice of which workspaces stay in RAM (`touch`)."""

    durable = True

    def __init__(self, store_dir: Path, params: LocalStoreParams) -> None:
        self.store_dir = store_dir
        self.ann_params = params.ann
        self.compact_after_records = params.compact_after_records
        self.compact_after_bytes = params.compact_after_bytes
        self._wals: dict[WorkspaceId, Wal] = {}
        self.handles = Handles(params.max_open_files)
        budget = None if params.max_resident_mb is None else int(params.max_resident_mb * 2**20)
        self.resident: ResidentSet[WorkspaceId] = ResidentSet(budget)
        self.evictions = 0  # workspaces let go of to stay within the budget
        self._trim = _malloc_trim()
        self._dir_lock: int | None = None

    def _snapshot_path(self, workspace_id: WorkspaceId) -> Path:
        return self.store_dir / f"{file_name(workspace_id)}{SNAPSHOT_SUFFIX}"

    def _wal_path(self, workspace_id: WorkspaceId) -> Path:
        return self.store_dir / f"{file_name(workspace_id)}{WAL_SUFFIX}"

    def _ann_path(self, workspace_id: WorkspaceId) -> Path:
        return self.store_dir / f"{file_name(workspace_id)}{ANN_SUFFIX}"

    async def _io(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.to_thread(fn, *args)
        except OSError as exc:  # the answer says what failed, the log says where
            logger.warning("local vector store I/O failed in %s: %s", self.store_dir, exc)
            raise StoreError(f"local vector store I/O failed: {exc.strerror or type(exc).__name__}") from exc

    async def start(self) -> None:
        await self._io(self._prepare_dir)

    def _prepare_dir(self) -> None:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        if self._dir_lock is None:
            self._dir_lock = _lock_dir(self.store_dir)
        for leftover in self.store_dir.glob(f"*{TMP_SUFFIX}"):
            leftover.unlink(missing_ok=True)

    async def writable(self) -> bool:
        return await asyncio.to_thread(os.access, self.store_dir, os.W_OK)

    # ----- what stays in RAM -----

    def touch(self, workspace_id: WorkspaceId, state: WorkspaceState, release: Callable[[WorkspaceId], bool]) -> None:
        """Note the use, then let idle workspaces go, least recently used first, while over the budget. Runs on the
        event loop without awaiting, so nothing else starts on a workspace while it is looked at; `release` keeps
        a workspace whose write lock is held. Everything resident is on disk (the log is written before RAM
        changes), so nothing is lost."""
        resident = self.resident
        resident.touch(workspace_id, state)
        if not resident.over_budget():
            return
        for other in resident.oldest_first():
            if not resident.over_budget():
                return
            if other == workspace_id or not release(other):
                continue
            resident.forget(other)
            wal = self._wals.pop(other, None)
            if wal is not None:
                self.handles.close(wal)
            self.evictions += 1

    # ----- loading and listing -----

    async def load(self, workspace_id: WorkspaceId) -> WorkspaceState | None:
        loaded = await self._io(self._read_workspace, workspace_id)
        if loaded is None:
            return None
        state, self._wals[workspace_id] = loaded
        return state

    def _read_workspace(self, workspace_id: WorkspaceId) -> tuple[WorkspaceState, Wal] | None:
        try:
            state, wal_id = read_snapshot(self._snapshot_path(workspace_id), workspace_id)
        except FileNotFoundError:
            return None
        if self.ann_params.min_rows is not None and state.dim is not None:  # before the log: replaying updates it
            state.ann = AnnIndex.load(
                self._ann_path(workspace_id), self.ann_params, stamp=wal_id, count=state.size, dim=state.dim
            )
        wal = Wal(self._wal_path(workspace_id), wal_id)
        replay(wal, state, workspace_id)
        state.nodes.compress()  # a big workspace keeps its nodes compressed (stores/inproc/node_table.py)
        if self._trim is not None and state.size >= TRIM_AFTER_NODES:
            self._trim()  # the snapshot's nodes blob and its split lines are garbage now
        return state, wal

    async def exists(self, workspace_id: WorkspaceId) -> bool:
        return await self._io(self._snapshot_path(workspace_id).is_file)

    async def list_workspaces(self) -> list[str]:
        return await self._io(self._scan)

    def _scan(self) -> list[str]:
        if not self.store_dir.is_dir():
            return []
        names: list[str] = []
        for entry in os.scandir(self.store_dir):
            if entry.name.endswith(SNAPSHOT_SUFFIX) and entry.is_file():
                stem = entry.name[: -len(SNAPSHOT_SUFFIX)]
                workspace_id: str | None = workspace_from_file_name(stem)
                if workspace_id is None and HASH_MARK in stem:  # a long id: its name is a hash, the header has it
                    workspace_id = header_workspace(Path(entry.path))
                if workspace_id is not None:
                    names.append(workspace_id)
        return names

    # ----- writing (under the workspace's write lock) -----

    def _write_snapshot(self, workspace_id: WorkspaceId, state: WorkspaceState, wal_id: str) -> None:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self._snapshot_path(workspace_id), snapshot_chunks(state, wal_id, workspace_id))
        if self._trim is not None and state.size >= TRIM_AFTER_NODES:
            self._trim()  # the encoded nodes are garbage now (see the module docstring)
        self._write_ann(workspace_id, state, wal_id)

    def _write_ann(self, workspace_id: WorkspaceId, state: WorkspaceState, wal_id: str) -> None:
        """Save the approximate index stamped with the snapshot `wal_id` (whose rows `state` holds), or remove a
        stale one. The index is a cache: failing to save it loses nothing (the next open rebuilds it)."""
        path = self._ann_path(workspace_id)
        if state.ann is None:
            if path.exists():
                path.unlink()
            return
        try:
            state.ann.save(path, wal_id, list(state.rows.values()))
        except (OSError, ValueError, RuntimeError) as exc:
            logger.warning("saving the approximate index of workspace %r failed: %s", workspace_id, exc)
            path.unlink(missing_ok=True)

    async def ann_ready(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        """Put a freshly built index on disk: beside the snapshot when the log is empty (the snapshot holds exactly
        these rows), else with a compaction."""
        wal = self._wals.get(workspace_id)
        if wal is None:
            return
        try:
            if wal.records or wal.needs_snapshot:
                await self._compact(workspace_id, state, wal)
            else:
                await self._io(self._write_ann, workspace_id, state, wal.snapshot_id)
        except StoreError as exc:  # the rows are safe; the index is rebuilt at the next open
            logger.warning("saving the approximate index of workspace %r failed: %s", workspace_id, exc)

    async def create(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        wal = Wal(self._wal_path(workspace_id), uuid.uuid4().hex)
        await self._io(self._write_snapshot, workspace_id, state, wal.snapshot_id)
        self._wals[workspace_id] = wal  # the log is created by the first append

    async def replace(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        wal = Wal(self._wal_path(workspace_id), uuid.uuid4().hex)
        await self._io(self._write_snapshot, workspace_id, state, wal.snapshot_id)  # the commit point
        old = self._wals.pop(workspace_id, None)
        self._wals[workspace_id] = wal
        try:
            if old is not None:
                await self._io(self.handles.close, old)
            await self._io(reset_wal, wal, self.handles)
        except StoreError as exc:  # the old log is stale now; the next append resets it
            logger.warning("resetting the log of workspace %r failed: %s", workspace_id, exc)

    async def drop(self, workspace_id: WorkspaceId) -> bool:
        self.resident.forget(workspace_id)
        return await self._io(self._remove_files, workspace_id, self._wals.pop(workspace_id, None))

    def _remove_files(self, workspace_id: WorkspaceId, wal: Wal | None) -> bool:
        if wal is not None:
            self.handles.close(wal)
        snapshot = self._snapshot_path(workspace_id)
        existed = snapshot.is_file()
        snapshot.unlink(missing_ok=True)  # the workspace is gone from here on; a leftover log is stale
        if existed:
            fsync_path(self.store_dir)
        wal_path = self._wal_path(workspace_id)
        ann_path = self._ann_path(workspace_id)
        leftovers = (
            wal_path,
            wal_path.with_name(wal_path.name + TMP_SUFFIX),
            snapshot.with_name(snapshot.name + TMP_SUFFIX),
            ann_path,
            ann_path.with_name(ann_path.name + TMP_SUFFIX),
            ann_path.with_name(ann_path.name + ".graph" + TMP_SUFFIX),
        )
        removed = False
        for path in leftovers:  # the log and any temp file hold memory text too: none may outlive the delete
            if path.exists():
                path.unlink()
                removed = True
        if removed:
            fsync_path(self.store_dir)
        return existed

    async def log_upsert(self, workspace_id: WorkspaceId, state: WorkspaceState, batch: Batch) -> None:
        await self._append_record(workspace_id, state, lambda: encode_upsert(batch))

    async def log_delete(self, workspace_id: WorkspaceId, state: WorkspaceState, ids: list[str]) -> None:
        await self._append_record(workspace_id, state, lambda: orjson.dumps({"op": "delete", "ids": ids}) + b"\n")

    async def _append_record(
        self, workspace_id: WorkspaceId, state: WorkspaceState, encode: Callable[[], bytes]
    ) -> None:
        wal = self._wals[workspace_id]
        if wal.needs_snapshot:
            await self._compact(workspace_id, state, wal)
        elif not wal.ready:
            await self._io(reset_wal, wal, self.handles)
        await self._io(append, wal, self.handles, encode)

    async def after_write(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        wal = self._wals[workspace_id]
        if wal.records >= self.compact_after_records or wal.size >= self.compact_after_bytes:
            try:
                await self._compact(workspace_id, state, wal)
            except StoreError as exc:  # the write itself is durable in the log; retry at the next one
                logger.warning("compacting workspace %r failed: %s", workspace_id, exc)

    async def _compact(self, workspace_id: WorkspaceId, state: WorkspaceState, wal: Wal) -> None:
        """Write a snapshot under a new wal_id (the commit point), then start an empty log for it."""
        wal_id = uuid.uuid4().hex
        await self._io(self._write_snapshot, workspace_id, state, wal_id)
        wal.snapshot_id, wal.ready, wal.needs_snapshot = wal_id, False, False
        await self._io(reset_wal, wal, self.handles)

    async def compact(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        """Fold the workspace's log into a new snapshot now."""
        await self._compact(workspace_id, state, self._wals[workspace_id])

    async def unload(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        """Compact a workspace with logged writes (the store closes) and close its log."""
        wal = self._wals.pop(workspace_id, None)
        if wal is None:
            return
        try:
            if wal.records or wal.needs_snapshot:
                await self._compact(workspace_id, state, wal)
        except StoreError as exc:  # nothing is lost: the log still holds the writes
            logger.warning("compacting workspace %r on close failed: %s", workspace_id, exc)
        finally:
            await self._io(self.handles.close, wal)

    async def close(self) -> None:
        await self._io(self.handles.close_all)  # logs of workspaces forgotten by a drop or a replace, if any
        if self._dir_lock is not None:
            fd, self._dir_lock = self._dir_lock, None
            os.close(fd)


class LocalVectorStore(MemoryVectorStore):
    """Workspaces in RAM, made durable by a snapshot and a write-ahead log per workspace under `store_dir`
    (`LocalFiles`, the store's persistence: `files`)."""

    backend = "local"

    def __init__(self, params: LocalStoreParams, *, embedder: EmbeddingClient, data_dir: Path | None = None) -> None:
        """Files go to `params.store_dir`, or to `<data_dir>/vector_store` when it is not set (one of the two must
        be; ValueError otherwise). A relative directory is resolved against the working directory now."""
        if params.store_dir is not None:
            store_dir = params.store_dir
        elif data_dir is not None:
            store_dir = Path(data_dir) / "vector_store"
        else:
            raise ValueError("the local store needs params.store_dir or a data_dir")
        files = LocalFiles(store_dir.expanduser().absolute(), params)
        super().__init__(MemoryStoreParams(ann=params.ann), embedder=embedder, persistence=files)
        self.files = files
        self.store_dir = files.store_dir

    async def start(self) -> None:
        await self.files.start()

    async def health(self) -> dict[str, Any]:
        # no paths here: /health is open, and the server's disk layout is nobody else's business
        if not await self.files.writable():
            return {"status": "down", "backend": self.backend, "reason": "the store directory is not writable"}
        return {"status": "ok", "backend": self.backend}

    async def compact(self, workspace_id: str) -> None:
        """Fold the workspace's log into a new snapshot now (no-op for an unknown workspace)."""
        workspace_id = validate_workspace_id(workspace_id)
        async with self._write_lock(workspace_id):
            state = await self._open(workspace_id, create=False)
            if state is not None:
                await self.files.compact(workspace_id, state)
