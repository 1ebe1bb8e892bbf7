"""The local backend: the store contract, plus durability (reopen, log replay, torn lines, compaction, kill -9)."""

from __future__ import annotations

import asyncio
import errno
import os
import random
import resource
import stat
import threading
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
import numpy as np
import orjson
import pytest

from reme_service.errors import StoreError
from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.stores.inproc import node_table
from reme_service.stores.inproc.local import LocalVectorStore
from reme_service.stores.inproc.resident import footprint
from reme_service.stores.inproc.workspace import QUANTIZED_FROM
from reme_service.stores.lexical import DENSE_MIN_ROWS
from reme_service.stores.params import AnnParams, LocalStoreParams
from reme_service.testing.contract import ContractTests
from reme_service.testing.contract.support import DIM, CountingEmbedder, corpus_nodes, ids, make_node, unit_vector
from tests.contract import local_store_writer as writer

pytestmark = pytest.mark.anyio

WS = "durable"


class TestLocalStore(ContractTests):
    MID_WRITE = ("_apply_upsert", False)  # the batch is in the write-ahead log; RAM does not hold it yet

    @pytest.fixture
    async def store(self, embedder: CountingEmbedder, tmp_path: Path) -> AsyncIterator[LocalVectorStore]:
        store = LocalVectorStore(LocalStoreParams(store_dir=tmp_path / "vs"), embedder=embedder)
        await store.start()
        yield store
        await store.close()


class TestLocalStoreCompactingOften(ContractTests):
    """The whole contract again with a compaction every third logged write."""

    MID_WRITE = TestLocalStore.MID_WRITE

    @pytest.fixture
    async def store(self, embedder: CountingEmbedder, tmp_path: Path) -> AsyncIterator[LocalVectorStore]:
        store = LocalVectorStore(
            LocalStoreParams(store_dir=tmp_path / "vs", compact_after_records=3), embedder=embedder
        )
        yield store
        await store.close()


class TestLocalStoreWithIndex(ContractTests):
    """The whole contract again with the approximate index on for every workspace (`ann.min_rows` 1), saved at
    every third logged write's compaction, and a RAM budget that makes every idle workspace reload (snapshot, index
    file, log) on its next use."""

    MID_WRITE = TestLocalStore.MID_WRITE

    @pytest.fixture
    async def store(self, embedder: CountingEmbedder, tmp_path: Path) -> AsyncIterator[LocalVectorStore]:
        params = LocalStoreParams(
            store_dir=tmp_path / "vs", compact_after_records=3, max_resident_mb=1e-6, ann=AnnParams(min_rows=1)
        )
        store = LocalVectorStore(params, embedder=embedder)
        await store.start()
        yield store
        await store.close()


class TestLocalStoreCompressed(ContractTests):
    """The whole contract again with every workspace's nodes zstd-compressed in RAM (`node_table.COMPRESS_FROM` 1),
    the approximate index on and every idle workspace reloading on its next use, as in `TestLocalStoreWithIndex`."""

    MID_WRITE = TestLocalStore.MID_WRITE

    @pytest.fixture
    async def store(
        self, embedder: CountingEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> AsyncIterator[LocalVectorStore]:
        monkeypatch.setattr(node_table, "COMPRESS_FROM", 1)
        params = LocalStoreParams(
            store_dir=tmp_path / "vs", compact_after_records=3, max_resident_mb=1e-6, ann=AnnParams(min_rows=1)
        )
        store = LocalVectorStore(params, embedder=embedder)
        await store.start()
        yield store
        for state in store._spaces.values():  # the suite ran on compressed nodes
            assert not state.size or state.nodes.codec.compressing
        await store.close()


class TestLocalStoreEvictingEverything(ContractTests):
    """The whole contract again with a RAM budget so small that every idle workspace leaves RAM at once."""

    MID_WRITE = TestLocalStore.MID_WRITE

    @pytest.fixture
    async def store(self, embedder: CountingEmbedder, tmp_path: Path) -> AsyncIterator[LocalVectorStore]:
        store = LocalVectorStore(LocalStoreParams(store_dir=tmp_path / "vs", max_resident_mb=1e-6), embedder=embedder)
        yield store
        await store.close()


def open_store(path: Path, **options: Any) -> LocalVectorStore:
    return LocalVectorStore(LocalStoreParams(store_dir=path, **options), embedder=HashEmbeddingClient(dimensions=DIM))


def wal_records(path: Path) -> list[dict[str, Any]]:
    """The records of a log file, without its header line."""
    return [orjson.loads(line) for line in path.read_bytes().splitlines()[1:]]


def append_bytes(path: Path, data: bytes) -> None:
    with open(path, "ab") as file:
        file.write(data)


def file_names(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def snapshot_header(path: Path) -> dict[str, Any]:
    with open(path, "rb") as file:
        return orjson.loads(file.readline())


async def state_of(store: LocalVectorStore, workspace_id: str = WS) -> list[tuple[str, str, bytes, bytes]]:
    """Everything a workspace holds, in listing order, comparable with ==."""
    return [
        (node.unique_id, node.content, orjson.dumps(node.metadata), node.vector.tobytes())
        for node in await store.list_nodes(workspace_id, with_vectors=True)
        if node.vector is not None
    ]


async def write_some(store: LocalVectorStore) -> None:
    await store.upsert(WS, corpus_nodes())
    await store.upsert(WS, [make_node(f"r{i}", vector=unit_vector(i), i=i) for i in range(50)])
    await store.delete_ids(WS, ["cat", "r3", "r7"])
    await store.upsert(WS, [make_node("deploy", "deploy again with helm"), make_node("cat", "the cat is back")])


async def test_survives_close_and_reopen_with_identical_results(tmp_path: Path) -> None:
    first = open_store(tmp_path)
    await write_some(first)
    await first.replace_workspace("other", [make_node("o1", "other one"), make_node("o2", "other two")])
    queries = [unit_vector(i) for i in range(5)]
    before = [await first.search_vector(WS, q, top_k=8) for q in queries]
    state = await state_of(first)
    await first.close()
    assert wal_records(tmp_path / f"{WS}.wal") == []  # close compacted

    second = open_store(tmp_path)
    assert await second.list_workspaces() == ["durable", "other"]
    assert await state_of(second) == state
    assert ids(await second.list_nodes("other")) == ["o1", "o2"]
    after = [await second.search_vector(WS, q, top_k=8) for q in queries]
    assert [[(h.node.unique_id, h.score) for h in hits] for hits in after] == [
        [(h.node.unique_id, h.score) for h in hits] for hits in before
    ]
    await second.close()


async def test_reopen_without_close_replays_the_log(tmp_path: Path) -> None:
    first = open_store(tmp_path)
    await write_some(first)
    assert snapshot_header(tmp_path / f"{WS}.snap")["count"] == 0  # everything is still only in the log
    assert [r["op"] for r in wal_records(tmp_path / f"{WS}.wal")] == ["upsert", "upsert", "delete", "upsert"]

    second = open_store(tmp_path)  # `first` is never closed: as after a crash
    assert await state_of(second) == await state_of(first)
    await second.upsert(WS, [make_node("late", "written by the second instance")])
    third = open_store(tmp_path)
    assert ids(await third.list_nodes(WS))[-1] == "late"
    assert len(await third.list_nodes(WS)) == len(await first.list_nodes(WS)) + 1


@pytest.mark.parametrize(
    "tail",
    [b'{"op": "upsert", "dim": 64, "nodes": [{"id": "torn"', b"\x00\x00\x00\x00", b'{"op": "upsert", "di\n'],
    ids=["half-record", "zeros", "bad-line-with-newline"],
)
async def test_torn_last_line_is_ignored_and_truncated(tmp_path: Path, tail: bytes) -> None:
    first = open_store(tmp_path)
    await write_some(first)
    wal = tmp_path / f"{WS}.wal"
    size = wal.stat().st_size
    append_bytes(wal, tail)

    second = open_store(tmp_path)
    assert await state_of(second) == await state_of(first)
    assert wal.stat().st_size == size
    await second.upsert(WS, [make_node("after-torn", "written after recovery")])
    third = open_store(tmp_path)
    assert ids(await third.list_nodes(WS))[-1] == "after-torn"
    await third.close()


async def test_a_bad_line_before_the_last_one_is_corruption(tmp_path: Path) -> None:
    first = open_store(tmp_path)
    await write_some(first)
    wal = tmp_path / f"{WS}.wal"
    lines = wal.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2][:40] + b"\n"
    wal.write_bytes(b"".join(lines))
    with pytest.raises(StoreError, match="corrupt"):
        await open_store(tmp_path).list_nodes(WS)


async def test_compaction_triggers_and_reloads_identically(tmp_path: Path) -> None:
    store = open_store(tmp_path, compact_after_records=4)
    for i in range(10):
        await store.upsert(WS, [make_node(f"n{i}", f"node {i}", i=i)])
    await store.delete_ids(WS, ["n2", "n5"])
    records = wal_records(tmp_path / f"{WS}.wal")
    header = snapshot_header(tmp_path / f"{WS}.snap")
    assert len(records) < 4
    assert header["count"] + sum(1 for r in records if r["op"] == "upsert") >= 8
    assert header["count"] >= 6  # compacted at least once after the 8th write
    reopened = open_store(tmp_path)
    assert await state_of(reopened) == await state_of(store)
    assert ids(await reopened.list_nodes(WS)) == [f"n{i}" for i in range(10) if i not in (2, 5)]

    big = open_store(tmp_path / "bytes", compact_after_bytes=20_000)
    await big.upsert(WS, [make_node(f"v{i}", vector=unit_vector(i)) for i in range(100)])  # ~35 kB record
    assert wal_records(tmp_path / "bytes" / f"{WS}.wal") == []
    assert snapshot_header(tmp_path / "bytes" / f"{WS}.snap")["count"] == 100


async def test_a_stale_log_from_an_interrupted_compaction_is_not_replayed(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    await store.upsert(WS, [make_node("a", "alpha"), make_node("b", "beta")])
    await store.compact(WS)
    await store.delete_ids(WS, ["a"])
    await store.upsert(WS, [make_node("a", "alpha again")])
    await store.upsert(WS, [make_node("n", "new")])
    wal = tmp_path / f"{WS}.wal"
    old_log = wal.read_bytes()
    await store.compact(WS)
    wal.write_bytes(old_log)  # as if the process died between the new snapshot and the log reset

    reopened = open_store(tmp_path)
    assert ids(await reopened.list_nodes(WS)) == ["b", "a", "n"]
    assert await state_of(reopened) == await state_of(store)
    await reopened.upsert(WS, [make_node("z", "after")])  # resets the stale log first
    assert ids(await open_store(tmp_path).list_nodes(WS)) == ["b", "a", "n", "z"]


async def test_workspaces_load_lazily_and_delete_removes_files(tmp_path: Path) -> None:
    first = open_store(tmp_path)
    await first.upsert("ws1", corpus_nodes())
    await first.upsert("ws2", corpus_nodes())
    await first.close()

    second = open_store(tmp_path)
    assert await second.list_workspaces() == ["ws1", "ws2"]
    assert await second.exists_workspace("ws2")
    assert second._spaces == {}  # listing and existence checks load nothing
    assert await second.delete_workspace("ws1")
    assert file_names(tmp_path) == ["ws2.snap", "ws2.wal"]
    await second.create_workspace("ws1")
    assert await second.list_nodes("ws1") == []
    assert len(await open_store(tmp_path).list_nodes("ws2")) == len(corpus_nodes())


async def test_replace_workspace_writes_a_snapshot_and_resets_the_log(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    await write_some(store)
    await store.replace_workspace(WS, [make_node("x", "only x"), make_node("y", vector=unit_vector(9))])
    assert wal_records(tmp_path / f"{WS}.wal") == []
    assert snapshot_header(tmp_path / f"{WS}.snap")["count"] == 2
    reopened = open_store(tmp_path)
    assert await state_of(reopened) == await state_of(store)


# ----- open files -----


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@contextmanager
def fd_limit(soft: int) -> Iterator[None]:
    """Lower this process's soft limit on open files (RLIMIT_NOFILE) for the block."""
    old_soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (old_soft, hard))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
async def test_open_files_stay_bounded_whatever_the_number_of_workspaces(tmp_path: Path) -> None:
    """Each log used to stay open: with 1,024 descriptors allowed, the ~1,006th workspace written got a 503
    ("Too many open files"). Now at most `max_open_files` logs are open; the others are reopened to append.
    400 workspaces are twice what the lowered descriptor limit below allows open at once (an unbounded store fails
    at about the 190th), and every log is closed and reopened at least once."""
    workspaces, bound, spare = 400, LocalStoreParams().max_open_files, 64
    assert bound == 128
    store = open_store(tmp_path)
    await store.start()
    baseline = open_fds()
    most = 0
    with fd_limit(baseline + bound + spare):  # the 1,200 logs cannot all be open, as with a ulimit of 1,024
        for round_ in ("a", "b"):  # the second round reopens logs closed by the first
            for n in range(workspaces):
                await store.upsert(f"ws{n}", [make_node(f"{round_}{n}", vector=unit_vector(n))])
                most = max(most, open_fds())
    assert most - baseline <= bound + 8, f"{most - baseline} descriptors open beyond the baseline"

    restarted = open_store(tmp_path)  # `store` is never closed: every write must be in the logs on disk
    for n in range(0, workspaces, 7):
        assert ids(await restarted.list_nodes(f"ws{n}")) == [f"a{n}", f"b{n}"]
    assert len(await restarted.list_workspaces()) == workspaces
    await store.close()
    assert open_fds() <= baseline - 1  # every log and the directory lock are closed


async def test_concurrent_appends_beyond_the_bound_all_land(tmp_path: Path) -> None:
    """Many workspaces appending at once through 2 open logs: a log is never closed under a running append."""
    store = open_store(tmp_path, max_open_files=2)
    await store.start()
    writes = [(f"ws{n}", f"r{round_}") for round_ in range(5) for n in range(40)]
    await asyncio.gather(*(store.upsert(ws, [make_node(uid, vector=unit_vector(len(uid)))]) for ws, uid in writes))
    assert len(store.files.handles) <= 2
    restarted = open_store(tmp_path)  # as after a crash: from the logs on disk
    for n in range(40):
        assert sorted(ids(await restarted.list_nodes(f"ws{n}"))) == [f"r{round_}" for round_ in range(5)]
    await store.close()


# ----- fsync -----


@dataclass(frozen=True, slots=True)
class Synced:
    """What one real `os.fsync` call made durable: the inode and size of the file, and for a directory its
    entries (name -> inode) at that moment."""

    inode: int
    size: int
    entries: dict[str, int] | None


class FsyncRecorder:
    """Installed as `os.fsync`: records each call (`Synced`), then makes the real system call."""

    def __init__(self, real: Callable[[int], None]) -> None:
        self.real = real
        self.calls: list[Synced] = []
        self._lock = threading.Lock()  # the store syncs from worker threads

    def __call__(self, fd: int) -> None:
        info = os.fstat(fd)
        entries = None
        if stat.S_ISDIR(info.st_mode):
            entries = {name: os.stat(name, dir_fd=fd, follow_symlinks=False).st_ino for name in os.listdir(fd)}
        self.real(fd)
        with self._lock:
            self.calls.append(Synced(info.st_ino, info.st_size, entries))

    async def during(self, write: Awaitable[object]) -> list[Synced]:
        """The fsyncs made while `write` ran (until it returned or raised)."""
        self.calls.clear()
        try:
            await write
        finally:
            calls = list(self.calls)
        return calls


def contents_synced(calls: list[Synced], path: Path) -> bool:
    """Whether the file at `path`, as it is now (inode and size), was fsynced."""
    info = os.stat(path)
    return any(c.entries is None and (c.inode, c.size) == (info.st_ino, info.st_size) for c in calls)


def name_synced(calls: list[Synced], path: Path) -> bool:
    """Whether `path`'s directory was fsynced while its entry named this very file (a rename is durable)."""
    parent, inode = os.stat(path.parent).st_ino, os.stat(path).st_ino
    return any(c.entries is not None and c.inode == parent and c.entries.get(path.name) == inode for c in calls)


def removal_synced(calls: list[Synced], path: Path) -> bool:
    """Whether `path`'s directory was fsynced after the entry was removed."""
    parent = os.stat(path.parent).st_ino
    return any(c.entries is not None and c.inode == parent and path.name not in c.entries for c in calls)


async def test_every_write_is_fsynced_before_it_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Power cannot be pulled here, but the fsync contract can be observed: the real `os.fsync` is recorded, and
    each write must have synced the files it changed, as they are when it returns, and their directory entries."""
    fsync = FsyncRecorder(os.fsync)
    monkeypatch.setattr(os, "fsync", fsync)
    store = open_store(tmp_path)
    snap, wal = tmp_path / f"{WS}.snap", tmp_path / f"{WS}.wal"

    synced = await fsync.during(store.create_workspace(WS))
    assert contents_synced(synced, snap) and name_synced(synced, snap)
    synced = await fsync.during(store.upsert(WS, corpus_nodes()))  # the log is created, then appended to
    assert name_synced(synced, wal) and contents_synced(synced, wal)
    synced = await fsync.during(store.upsert(WS, [make_node("x", "appended")]))
    assert contents_synced(synced, wal)
    synced = await fsync.during(store.delete_ids(WS, ["x"]))
    assert contents_synced(synced, wal)
    for write in (store.compact(WS), store.replace_workspace(WS, [make_node("y", "replaced")])):
        synced = await fsync.during(write)
        assert contents_synced(synced, snap) and name_synced(synced, snap)
        assert contents_synced(synced, wal) and name_synced(synced, wal)

    # a failed append (the disk filled up part-way) is cut off the log, durably
    size, real_write = wal.stat().st_size, os.write

    def full_disk(fd: int, data: bytes | memoryview) -> int:
        if os.fstat(fd).st_ino == wal.stat().st_ino:
            real_write(fd, bytes(data[:10]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(StoreError, match="No space left"):
        await fsync.during(store.upsert(WS, [make_node("z", "does not fit")]))
    synced = list(fsync.calls)
    monkeypatch.setattr(os, "write", real_write)
    assert wal.stat().st_size == size and contents_synced(synced, wal)

    # recovery cuts a torn last line off the log, durably, before anything is appended after it
    append_bytes(wal, b'{"op": "upsert", "di')
    synced = await fsync.during(open_store(tmp_path).list_nodes(WS))
    assert wal.stat().st_size == size and contents_synced(synced, wal)

    synced = await fsync.during(store.delete_workspace(WS))
    assert not snap.exists() and removal_synced(synced, snap)


# ----- kill -9 -----


def _run_writer_until_killed(store_dir: Path, first: int, wanted_acks: int, stderr_path: Path) -> list[int]:
    """Start the writer, SIGKILL it soon after it acknowledged `wanted_acks` batches; the acknowledged batches."""
    return writer.run_until_killed(store_dir, first, wanted_acks, stderr_path, ["5"], random.uniform(0.0, 0.01))


async def _check_after_crash(store_dir: Path, acked: set[int], in_flight: set[int], *, close: bool) -> int:
    """Every acknowledged batch is whole, an in-flight one is whole or absent; returns the last batch present."""
    store = open_store(store_dir)
    nodes = await store.list_nodes(writer.WORKSPACE, with_vectors=True)
    by_batch: defaultdict[int, list[Any]] = defaultdict(list)
    for node in nodes:
        by_batch[node.metadata["batch"]].append(node)
    assert acked <= set(by_batch), "an acknowledged batch was lost"
    assert set(by_batch) <= acked | in_flight, "a batch appeared that was never written"
    embedder = HashEmbeddingClient(dimensions=DIM)
    for batch, got in by_batch.items():
        expected = writer.batch_nodes(batch)
        assert ids(got) == ids(expected), f"batch {batch} is partial"
        for node, want in zip(got, expected, strict=True):
            vector = want.vector if want.vector is not None else embedder.embed_sync([want.content])[0]
            np.testing.assert_allclose(node.vector, vector, atol=1e-6)
            assert node.content == want.content and node.metadata == want.metadata
    assert [n.metadata["batch"] for n in nodes] == sorted(n.metadata["batch"] for n in nodes)  # insertion order
    if close:
        await store.close()
    return max(by_batch)


async def test_kill_9_mid_write_loses_no_acknowledged_batch(tmp_path: Path) -> None:
    store_dir, stderr_path = tmp_path / "vs", tmp_path / "writer.stderr"
    next_batch = 0
    acked: set[int] = set()
    in_flight: set[int] = set()
    for round_, wanted in enumerate((12, 17, 9)):
        got = await anyio.to_thread.run_sync(_run_writer_until_killed, store_dir, next_batch, wanted, stderr_path)
        assert len(got) >= wanted, f"the writer failed:\n{stderr_path.read_text()}"
        acked |= set(got)
        in_flight.add(max(got) + 1)
        next_batch = await _check_after_crash(store_dir, acked, in_flight, close=round_ != 1) + 1


async def test_a_store_dir_belongs_to_one_process_at_a_time(tmp_path: Path) -> None:
    embedder = HashEmbeddingClient(dimensions=8)
    first = LocalVectorStore(LocalStoreParams(store_dir=tmp_path), embedder=embedder)
    await first.start()
    second = LocalVectorStore(LocalStoreParams(store_dir=tmp_path), embedder=embedder)
    with pytest.raises(StoreError, match="is in use by another process.*docs/scaling.md"):
        await second.start()
    await first.close()
    await second.start()  # free once the first store is closed (or its process is gone)
    await second.close()


async def test_idle_workspaces_leave_ram_past_the_budget_and_come_back_whole(tmp_path: Path) -> None:
    store = open_store(tmp_path / "vs", max_resident_mb=0.05)  # ~50 KiB: a handful of 40-node workspaces
    names = [f"ws{i}" for i in range(30)]
    try:
        for name in names:
            await store.upsert(name, [make_node(f"{name}-{j}", f"text {j} of {name}") for j in range(40)])
        assert store.files.evictions > 0
        assert store.resident_workspaces() is not None and store.resident_workspaces() < len(names)  # type: ignore[operator]
        assert store.files.resident.total <= 0.05 * 2**20 or store.resident_workspaces() == 1
        for name in names:  # every workspace answers in full, loaded again where it had left
            nodes = await store.list_nodes(name)
            assert sorted(n.unique_id for n in nodes) == sorted(f"{name}-{j}" for j in range(40))
            hits = await store.search(name, f"text 7 of {name}", top_k=1)
            assert hits[0].node.unique_id == f"{name}-7"
        await store.delete_ids("ws0", ["ws0-1"])  # writes to a workspace that had left RAM are kept
        await store.upsert("ws1", [make_node("ws1-new", "a new one")])
    finally:
        await store.close()
    reopened = open_store(tmp_path / "vs")
    try:
        assert len(await reopened.list_nodes("ws0")) == 39
        assert len(await reopened.list_nodes("ws1")) == 41
        assert await reopened.list_workspaces() == sorted(names)
    finally:
        await reopened.close()


async def test_a_search_counts_what_it_built(tmp_path: Path) -> None:
    """The int8 copy a first search builds, the BM25 index a hybrid search builds and the scores it keeps count in
    the RAM budget as soon as the search ends, so an idle workspace searched once is not under-counted until its
    next use."""
    store = open_store(tmp_path / "vs", max_resident_mb=100)
    rows = QUANTIZED_FROM  # exact scans go through an int8 copy; "garden", in every row, keeps its BM25 scores
    assert rows >= DENSE_MIN_ROWS
    try:
        await store.upsert(WS, [make_node(f"n{i}", f"note {i} about the garden") for i in range(rows)])
        state = store._spaces[WorkspaceId(WS)]
        assert state.quantized is None and store.files.resident.total == footprint(state)
        await store.search(WS, "garden", top_k=1)  # builds the int8 copy
        assert state.quantized is not None and store.files.resident.total == footprint(state)
        without = footprint(state)
        assert state.lexical is None and store.files.resident.total == without
        await store.search_hybrid(WS, "zebra", top_k=3)  # builds the index; no term kept
        assert state.lexical is not None and state.lexical.kept_terms == 0
        assert store.files.resident.total == without + state.lexical.nbytes() > without + rows * 8
        await store.search_hybrid(WS, "garden", top_k=3)
        assert state.lexical.kept_terms == 1
        assert store.files.resident.total == without + state.lexical.nbytes()  # 4 bytes a row more
    finally:
        await store.close()


async def test_a_workspace_being_written_is_never_let_go(tmp_path: Path) -> None:
    """Eviction skips a workspace whose write lock is held: its log and state stay as the writer left them."""
    store = open_store(tmp_path / "vs", max_resident_mb=1e-6)
    try:
        await store.upsert("busy", [make_node("a", "alpha")])
        async with store._write_lock("busy"):
            await store.upsert("other", [make_node("b", "beta")])  # over budget: "busy" is idle-looking but locked
            assert "busy" in store._spaces
        await store.upsert("other", [make_node("c", "gamma")])
        assert "busy" not in store._spaces  # unlocked: it goes
        assert [n.unique_id for n in await store.list_nodes("busy")] == ["a"]
    finally:
        await store.close()
