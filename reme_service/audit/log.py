"""`AuditLog`: appends records to `<dir>/<UTC date>.jsonl`, one line each, fsynced before the request answers.

Appends are serialised by one lock and made with one `write` of the whole line on an `O_APPEND` descriptor, then
`fsync` (`durable.append_synced`; the directory too when the day's file is new), so concurrent requests never
interleave or tear lines and an answered request's line survives a crash. The blocking part runs in a worker
thread.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import orjson

from reme_service.audit.record import AuditRecord
from reme_service.durable import append_synced, fsync_path


class AuditLog:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()

    def path_for(self, moment: datetime) -> Path:
        return self.directory / f"{moment.strftime('%Y-%m-%d')}.jsonl"

    def append_sync(self, record: AuditRecord) -> None:
        line = orjson.dumps(record.model_dump(mode="json", exclude_defaults=False)) + b"\n"
        with self._lock:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.path_for(record.time)
            created = not path.exists()
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                append_synced(fd, line)
            finally:
                os.close(fd)
            if created:  # the day's first line: its file's name must survive a crash too
                fsync_path(self.directory)

    async def append(self, record: AuditRecord, *, token: str | None = None) -> None:
        """Append `record`, on disk when this returns (`token`, the request's trail token, is for the PostgreSQL
        log's drafts: a file log takes no drafts, so one line per request)."""
        await asyncio.to_thread(self.append_sync, record)


def read_records(directory: Path) -> Iterator[AuditRecord]:
    """Every record under `directory`, oldest file first (a torn last line of a crashed append is skipped)."""
    for path in sorted(directory.glob("*.jsonl")):
        with open(path, "rb") as handle:
            for line in handle:
                if not line.endswith(b"\n"):
                    break
                yield AuditRecord.model_validate(orjson.loads(line))
