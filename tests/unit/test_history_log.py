"""`history/log.py` across processes: appends and scrubbing rewrites from several processes at once lose no entry
(the `flock` on `<dir>/.lock`), and a torn last line is ended by the next append and skipped by readers."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from reme_service.history.entry import HistoryEntry, Scrub
from reme_service.history.log import HistoryLog
from reme_service.schema.workspace_ids import WorkspaceId

ROUNDS = 60


def _append(directory: str, name: str, start: Any) -> None:
    log = HistoryLog(Path(directory))
    start.wait()
    for i in range(ROUNDS):
        log.write_sync("ws", [HistoryEntry(event="ADD", memory_id=f"{name}-{i}", after={"content": f"text {i}"})])


def _scrub(directory: str, start: Any) -> None:
    log = HistoryLog(Path(directory))
    start.wait()
    for i in range(ROUNDS):
        log.write_sync("ws", [HistoryEntry(event="DELETE", memory_id=f"gone-{i}"), Scrub(frozenset({f"gone-{i}"}))])


@pytest.mark.slow
def test_concurrent_processes_lose_no_entry(tmp_path: Path) -> None:
    # a long file makes each scrubbing rewrite slow, so without the lock appends land while one is under way
    filler = [HistoryEntry(event="ADD", memory_id=f"f{i}", after={"content": "x" * 200}) for i in range(3000)]
    HistoryLog(tmp_path).write_sync("ws", filler)
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(3)  # all three begin together, once imported
    workers = [context.Process(target=_append, args=(str(tmp_path), name, start)) for name in ("a", "b")]
    workers.append(context.Process(target=_scrub, args=(str(tmp_path), start)))
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    log = HistoryLog(tmp_path)
    for name in ("a", "b"):
        for i in range(ROUNDS):
            (entry,) = log.read_sync("ws", f"{name}-{i}")
            assert entry["after"] == {"content": f"text {i}"}
    assert all(log.read_sync("ws", f"gone-{i}") for i in range(ROUNDS))


def test_a_torn_line_is_skipped_and_ended(tmp_path: Path) -> None:
    log = HistoryLog(tmp_path)
    log.write_sync("ws", [HistoryEntry(event="ADD", memory_id="m1", after={"content": "one"})])
    with open(log.path_for(WorkspaceId("ws")), "ab") as file:
        file.write(b'{"event":"UPDATE","memory_id":"m1","bef')  # a crash in the middle of an append
    log.write_sync("ws", [HistoryEntry(event="DELETE", memory_id="m1")])
    assert [e["event"] for e in log.read_sync("ws", "m1")] == ["ADD", "DELETE"]
    log.write_sync("ws", [Scrub(None)])
    assert b"bef" not in log.path_for(WorkspaceId("ws")).read_bytes()
    assert [e["after"] for e in log.read_sync("ws", "m1")] == [None, None]
