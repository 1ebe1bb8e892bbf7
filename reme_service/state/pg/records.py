"""The audit trail and the memories' history in PostgreSQL: `PgAuditLog` (append-only table) and `PgHistoryLog`.

Both write in one transaction per call, committed before the request answers (as the file backends fsync). With a
pgvector store on the same database (`PgHistoryLog.joins`), a write's history entries are not written by a call of
their own: `PgHistoryLog.work` gives their statements to the store's write transaction (`stores/joined.py`,
`storage/audit.py`), so the memories and their history are committed together, or neither (docs/scaling.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from reme_service.audit.record import AuditRecord
from reme_service.history.entry import HistoryEntry, HistoryStep
from reme_service.schema.workspace_ids import validate_workspace_id
from reme_service.state.pg.db import Conn, StateDb
from reme_service.stores.joined import JoinsTransactions, TransactionWork


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
    history keeps ids, events and times, never its text), in the transaction of the request's other entries.

    `work` gives the same statements to run in another transaction on this database: the pgvector store's write of
    the memories they record (`stores/joined.py`, `storage/audit.py`)."""

    def __init__(self, db: StateDb) -> None:
        self.db = db

    def joins(self, store: object) -> bool:
        """Whether `store` can write these rows in its own transactions: it joins transactions
        (`stores.joined.JoinsTransactions`) and its database is this one."""
        target = self.db.target
        return isinstance(store, JoinsTransactions) and store.in_database(target.dsn, target.conn_kwargs)

    async def ready(self) -> None:
        """The history table exists (the schema migrated): before the first joined write of a node whose database
        was down at start."""
        if not self.db.opened:
            await asyncio.to_thread(self.db.ready)

    def work(self, workspace_id: str, steps: Sequence[HistoryStep]) -> TransactionWork:
        """The writes of `steps` as work for another transaction on this database (a psycopg `AsyncConnection`)."""
        statements = _statements(self.db.table("history"), validate_workspace_id(workspace_id), steps)

        async def run(conn: AsyncConnection[Any]) -> None:
            cursor = conn.cursor()
            for query, args in statements:
                if isinstance(args, list):
                    await cursor.executemany(query, args)
                else:
                    await cursor.execute(query, args)

        return run

    def write_sync(self, workspace_id: str, steps: Sequence[HistoryStep]) -> None:
        if not steps:
            return
        statements = _statements(self.db.table("history"), validate_workspace_id(workspace_id), steps)

        def work(conn: Conn) -> None:
            cursor = conn.cursor()
            for query, args in statements:
                if isinstance(args, list):
                    cursor.executemany(query, args)
                else:
                    cursor.execute(query, args)

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


#: a statement and its parameters: a list of rows (executemany) or one row
Statement = tuple[str, list[tuple[Any, ...]] | tuple[Any, ...]]


def _statements(table: str, workspace: str, steps: Sequence[HistoryStep]) -> list[Statement]:
    """The statements that write `steps` in order: runs of entries as one insert of many rows, each `Scrub` one
    update."""
    insert = f"INSERT INTO {table} (workspace_id, memory_id, entry) VALUES (%s, %s, %s)"  # noqa: S608
    scrub = f"UPDATE {table} SET entry = entry - 'before' - 'after' WHERE workspace_id = %s"  # noqa: S608
    statements: list[Statement] = []
    pending: list[tuple[Any, ...]] = []
    for step in steps:
        if isinstance(step, HistoryEntry):
            pending.append((workspace, step.memory_id, Jsonb(_entry(step))))
            continue
        if pending:
            statements.append((insert, pending))
            pending = []
        if step.ids is None:
            statements.append((scrub + " AND entry ?| array['before', 'after']", (workspace,)))
        else:
            statements.append((scrub + " AND memory_id = ANY(%s)", (workspace, sorted(step.ids))))
    if pending:
        statements.append((insert, pending))
    return statements
