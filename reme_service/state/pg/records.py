"""The audit trail and the memories' history in PostgreSQL: `PgAuditLog` (append-only table) and `PgHistoryLog`.

Both write in one transaction per call, committed before the request answers (as the file backends fsync). With a
pgvector store the history is written right after the memories' own transaction (on the same database, not in
it): a node killed between the two loses that request's history entries, never the memories (docs/scaling.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from reme_service.audit.record import AuditRecord
from reme_service.history.entry import HistoryEntry, HistoryStep, Scrub
from reme_service.schema.workspace_ids import validate_workspace_id
from reme_service.state.pg.db import Conn, StateDb


class PgAuditLog:
    def __init__(self, db: StateDb) -> None:
        self.db = db

    def append_sync(self, record: AuditRecord) -> None:
        query = f"INSERT INTO {self.db.table('audit')} (time, workspace_id, record) VALUES (%s, %s, %s)"  # noqa: S608
        data = record.model_dump(mode="json", exclude_defaults=False)
        self.db.run(lambda conn: conn.execute(query, (record.time, record.workspace_id, Jsonb(data))))

    async def append(self, record: AuditRecord) -> None:
        await asyncio.to_thread(self.append_sync, record)


def read_audit(
    db: StateDb, *, workspace: str | None = None, since: datetime | None = None, until: datetime | None = None
) -> Iterator[AuditRecord]:
    """The records, oldest first, of `workspace` (all when None) in [since, until)."""
    clauses: list[str] = ["TRUE"]
    args: list[object] = []
    if workspace:
        clauses.append("workspace_id = %s")
        args.append(workspace)
    if since:
        clauses.append("time >= %s")
        args.append(since)
    if until:
        clauses.append("time < %s")
        args.append(until)
    query = f"SELECT record FROM {db.table('audit')} WHERE {' AND '.join(clauses)} ORDER BY seq"  # noqa: S608
    rows = db.run(lambda conn: conn.execute(query, args).fetchall())
    for (record,) in rows:
        yield AuditRecord.model_validate(record)


def _entry(entry: HistoryEntry) -> dict[str, Any]:
    return {k: v for k, v in entry.model_dump(mode="json").items() if v is not None}


class PgHistoryLog:
    """One row per history entry; a `Scrub` strips `before` and `after` from the rows it names (a deleted memory's
    history keeps ids, events and times, never its text), in the transaction of the request's other entries."""

    def __init__(self, db: StateDb) -> None:
        self.db = db

    def write_sync(self, workspace_id: str, steps: Sequence[HistoryStep]) -> None:
        if not steps:
            return
        workspace = validate_workspace_id(workspace_id)
        table = self.db.table("history")

        def work(conn: Conn) -> None:
            pending: list[tuple[str, str, Jsonb]] = []
            cursor = conn.cursor()
            insert = f"INSERT INTO {table} (workspace_id, memory_id, entry) VALUES (%s, %s, %s)"  # noqa: S608
            for step in steps:
                if isinstance(step, HistoryEntry):
                    pending.append((workspace, step.memory_id, Jsonb(_entry(step))))
                    continue
                if pending:
                    cursor.executemany(insert, pending)
                    pending = []
                _scrub(conn, table, workspace, step)
            if pending:
                cursor.executemany(insert, pending)

        self.db.run(work)

    async def write(self, workspace_id: str, steps: Sequence[HistoryStep]) -> None:
        await asyncio.to_thread(self.write_sync, workspace_id, steps)

    def read_sync(self, workspace_id: str, memory_id: str) -> list[dict[str, Any]]:
        workspace = validate_workspace_id(workspace_id)
        query = f"SELECT entry FROM {self.db.table('history')} WHERE workspace_id = %s AND memory_id = %s ORDER BY seq"  # noqa: S608,E501
        rows = self.db.run(lambda conn: conn.execute(query, (workspace, memory_id)).fetchall())
        return [HistoryEntry.model_validate(row[0]).model_dump(mode="json") for row in rows]

    async def read(self, workspace_id: str, memory_id: str) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.read_sync, workspace_id, memory_id)


def _scrub(conn: Conn, table: str, workspace: str, step: Scrub) -> None:
    query = f"UPDATE {table} SET entry = entry - 'before' - 'after' WHERE workspace_id = %s"  # noqa: S608
    if step.ids is None:
        conn.execute(query + " AND entry ?| array['before', 'after']", (workspace,))
    else:
        conn.execute(query + " AND memory_id = ANY(%s)", (workspace, sorted(step.ids)))
