"""`HistoryLog`: the history of every memory, one append-only JSONL file per workspace under `<data_dir>/history/`.

A request's entries for a workspace are appended with one `write` and fsynced before the request answers (as the
audit log's lines: `durable.append_synced`; the directory too when the file is new). Deleting memories scrubs
their entries: the file is rewritten (`durable.atomic_write`, one fsync too) with `before` and `after` removed
from every entry of those memories, so a deleted memory's history keeps ids, events and times, never its text.
Dropping or replacing a workspace scrubs all of its file. A torn last line (a crash during an append) is ended
by the next append and skipped by readers.

Several processes share the folder (`http.workers` > 1): every append and rewrite holds an exclusive `flock` on
`<dir>/.lock`, so a rewrite never loses a line another process appended meanwhile. The blocking work runs in a
worker thread.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from reme_service.durable import append_synced, atomic_write, exclusive_lock, fsync_path
from reme_service.history.entry import HistoryEntry, HistoryStep, Scrub
from reme_service.schema.workspace_ids import WorkspaceId, file_name, validate_workspace_id

LOCK_NAME = ".lock"
SCRUBBED = ("before", "after")
#: every entry that holds text has an `after` (nulls are left out of the lines), so other lines are not parsed
TEXT_MARK = b'"after":'


class HistoryLog:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()

    def path_for(self, workspace_id: WorkspaceId) -> Path:
        return self.directory / f"{file_name(workspace_id)}.jsonl"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock, exclusive_lock(self.directory / LOCK_NAME):
            yield

    # -- writing

    def write_sync(self, workspace_id: str, steps: Sequence[HistoryStep]) -> None:
        """Apply a request's steps in order: entries are appended; a `Scrub` strips the text of the entries before
        it. Without a scrub this is one append; with one, the file is rewritten atomically."""
        if not steps:
            return
        path = self.path_for(validate_workspace_id(workspace_id))  # (the trail's ids passed a store's check)
        with self._locked():
            if any(isinstance(step, Scrub) for step in steps):
                self._rewrite(path, steps)
            else:
                self._append(path, [step for step in steps if isinstance(step, HistoryEntry)])

    async def write(self, workspace_id: str, steps: Sequence[HistoryStep]) -> None:
        await asyncio.to_thread(self.write_sync, workspace_id, steps)

    @staticmethod
    def _append(path: Path, entries: list[HistoryEntry]) -> None:
        data = b"".join(_line(entry) for entry in entries)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":  # a torn line from a crashed append: end it
                data = b"\n" + data
            append_synced(fd, data)
        finally:
            os.close(fd)
        if size == 0:  # a new file: its name must survive a crash too
            fsync_path(path.parent)

    @staticmethod
    def _rewrite(path: Path, steps: Sequence[HistoryStep]) -> None:
        try:
            lines = [line + b"\n" for line in path.read_bytes().splitlines() if _parse(line) is not None]
        except FileNotFoundError:
            lines = []
        for step in steps:
            if isinstance(step, HistoryEntry):
                lines.append(_line(step))
                continue
            for index, line in enumerate(lines):
                if TEXT_MARK not in line or (entry := _parse(line)) is None:
                    continue
                if step.ids is None or entry.get("memory_id") in step.ids:
                    for key in SCRUBBED:
                        entry.pop(key, None)
                    lines[index] = orjson.dumps(entry) + b"\n"
        atomic_write(path, lines)

    # -- reading

    def read_sync(self, workspace_id: str, memory_id: str) -> list[dict[str, Any]]:
        """The entries of one memory, oldest first."""
        path = self.path_for(validate_workspace_id(workspace_id))
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return []
        needle = orjson.dumps(memory_id)
        found = []
        for line in raw.splitlines():
            if needle in line and (entry := _parse(line)) is not None and entry.get("memory_id") == memory_id:
                found.append(HistoryEntry.model_validate(entry).model_dump(mode="json"))
        return found

    async def read(self, workspace_id: str, memory_id: str) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.read_sync, workspace_id, memory_id)


def _line(entry: HistoryEntry) -> bytes:
    data = entry.model_dump(mode="json")
    return orjson.dumps({k: v for k, v in data.items() if v is not None}) + b"\n"


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
