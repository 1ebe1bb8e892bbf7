"""Every file the service writes that can hold memories' text is its user's alone (mode 0600), whatever the umask:
the store's snapshots and write-ahead logs, the history, library dumps and the audit log."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.service.conftest import ServeFn

pytestmark = [pytest.mark.service, pytest.mark.own_backend]  # the local store's files


def test_files_holding_memories_are_not_readable_by_others(serve: ServeFn, tmp_path: Path) -> None:
    previous = os.umask(0o022)  # the usual umask: files created plainly would be 0644
    try:
        with serve() as client:
            memory = {"when_to_use": "when paging", "content": "a private fact"}
            for body in (
                {"workspace_id": "ws", "action": "insert", "memory_dicts": [memory]},
                {"workspace_id": "ws", "action": "dump", "path": "ws.jsonl"},
                {"workspace_id": "ws", "action": "insert", "memory_dicts": [{**memory, "content": "another"}]},
            ):
                assert client.post("/vector_store", json=body).json()["success"] is True
            messages = [{"role": "user", "content": "a private fact " * 2000}]
            summary = {"workspace_id": "ws", "messages": messages, "max_total_tokens": 100, "store_dir": "ws"}
            assert client.post("/summary_working_memory", json=summary).status_code == 200
            listed = client.post("/vector_store", json={"workspace_id": "ws", "action": "list"}).json()
            memory_id = listed["metadata"]["action_result"][0]["memory_id"]
            assert client.post(
                "/vector_store", json={"workspace_id": "ws", "action": "history", "memory_id": memory_id}
            ).json()["success"]
    finally:
        os.umask(previous)
    data = tmp_path / "data"
    files = [p for p in data.rglob("*") if p.is_file() and p.name != ".lock"]
    kinds = {p.suffix for p in files}
    assert {".snap", ".wal", ".jsonl"} <= kinds, kinds  # the store, the history, the library were written
    shared = [f"{p.relative_to(data)} {stat.filemode(p.stat().st_mode)}" for p in files if p.stat().st_mode & 0o077]
    assert not shared, shared
