"""The audit trail and the memories' history in PostgreSQL: `PgAuditLog` (append-only table), `PgHistoryLog` and
`PgJournal`.

Each writes in one transaction per call, committed before the request answers (as the file backends fsync). With a
pgvector store on the same database (`PgJournal.joins`), a write's history entries and a draft of its request's
audit record are not written by calls of their own: `PgJournal.work` gives their statements to the store's write
transaction (`stores/joined.py`, `storage/audit.py`), so the memories, their history and the audit row are committed
together, or none of them (docs/scaling.md). A request's rows carry its trail token (`AuditTrail.token`); its record
is the last of them (`read_audit`): its final record is appended only when it differs from the last draft. On
another database, the recorder writes a request's history entries and its record in one transaction
(`PgJournal.commit`): one commit, and never one without the other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from reme_service.audit.record import AuditRecord
from reme_service.history.entry import HistoryEntry, HistoryStep
from reme_service.schema.workspace_ids import validate_workspace_id
from reme_service.state.pg.db import Conn, StateDb
from reme_service.stores.joined import JoinsTransactions, TransactionWork

#: a statement and its parameters: a list of rows (executemany) or one row
Statement = tuple[str, list[tuple[Any, ...]] | tuple[Any, ...]]


class PgJournal:
    """The history entries and the audit draft of a write, as work for the pgvector store's own transaction on this
    database (`stores/joined.py`, `storage/audit.py`): committed with the memories, or rolled back with them."""

    def __init__(self, db: StateDb, *, audit: bool) -> None:
        """`audit`: whether the audit log is on (then a write's transaction also takes its request's draft)."""
        self.db = db
        self.audit = audit

    def joins(self, store: object) -> bool:
        """Whether `store` can write these rows in its own transactions: it joins transactions
        (`stores.joined.JoinsTransactions`) and its database is this one."""
        target = self.db.target
        return isinstance(store, JoinsTransactions) and store.in_database(target.dsn, target.conn_kwargs)

    async def ready(self) -> None:
        """The tables exist (the schema migrated): before the first joined write of a node whose database was down
        at start."""
        if not self.db.opened:
            await asyncio.to_thread(self.db.ready)

    def work(
        self, workspace_id: str, steps: Sequence[HistoryStep], record: AuditRecord | None, token: str
    ) -> TransactionWork:
        """The writes of `steps` (history kept) and of `record` (the request's audit record as of this write, with
        its trail `token`; None: none) for another transaction on this database (a psycopg `AsyncConnection`)."""
        statements = self._rows({workspace_id: steps}, record, token)

        async def run(conn: AsyncConnection[Any]) -> None:
            # nothing is fetched: in the store's pipeline they go with its own statements (`stores/pg/store.py`)
            cursor = conn.cursor()
            for query, args in statements:
                if isinstance(args, list):
                    await cursor.executemany(query, args)
                else:
                    await cursor.execute(query, args)

        return run

    def commit_sync(
        self, history: Mapping[str, Sequence[HistoryStep]], record: AuditRecord | None, token: str | None
    ) -> None:
        """The request's history entries (by workspace) and its audit record in one transaction of their own: the
        recorder's write when the store's transactions do not take them (`RecordsTogether`)."""
        statements = self._rows(history, record, token)
        if statements:
            self.db.run(lambda conn: _execute(conn, statements))

    async def commit(
        self, history: Mapping[str, Sequence[HistoryStep]], record: AuditRecord | None, token: str | None
    ) -> None:
        await asyncio.to_thread(self.commit_sync, history, record, token)

    def _rows(
        self, history: Mapping[str, Sequence[HistoryStep]], record: AuditRecord | None, token: str | None
    ) -> list[Statement]:
        """The statements writing a request's history steps (by workspace) and then its audit record."""
        table = self.db.table("history")
        statements = [
            statement
            for workspace, steps in history.items()
            for statement in _statements(table, validate_workspace_id(workspace), steps)
        ]
        if record is not None:
            statements.append(_audit_insert(self.db.table("audit"), record, token))
        return statements


def _execute(conn: Conn, statements: Sequence[Statement]) -> None:
    cursor = conn.cursor()
    for query, args in statements:
        if isinstance(args, list):
            cursor.executemany(query, args)
        else:
            cursor.execute(query, args)


class PgAuditLog:
    """The append-only `audit` table. A row may carry its request's trail token (`AuditTrail.token`): a request whose
    writes committed drafts of its record (`PgJournal`) has several rows, and the last one is its record
    (`read_audit`)."""

    def __init__(self, db: StateDb) -> None:
        self.db = db

    def append_sync(self, record: AuditRecord, *, token: str | None = None) -> None:
        query, args = _audit_insert(self.db.table("audit"), record, token)
        self.db.run(lambda conn: conn.execute(query, args))

    async def append(self, record: AuditRecord, *, token: str | None = None) -> None:
        await asyncio.to_thread(self.append_sync, record, token=token)


def _audit_insert(table: str, record: AuditRecord, token: str | None) -> Statement:
    query = f"INSERT INTO {table} (time, workspace_id, record, trail) VALUES (%s, %s, %s, %s)"  # noqa: S608
    data = record.model_dump(mode="json", exclude_defaults=False)
    return query, (record.time, record.workspace_id, Jsonb(data), token)


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
    # of a request's rows with one trail token (drafts committed with its writes, then maybe its final record), the last
    table = db.table("audit")
    clauses.append(
        f"(a.trail IS NULL OR NOT EXISTS (SELECT 1 FROM {table} b WHERE b.trail = a.trail AND b.seq > a.seq))"
    )
    query = f"SELECT record FROM {table} a WHERE {' AND '.join(clauses)} ORDER BY seq"  # noqa: S608
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
        statements = _statements(self.db.table("history"), validate_workspace_id(workspace_id), steps)
        self.db.run(lambda conn: _execute(conn, statements))

    async def write(self, workspace_id: str, steps: Sequence[HistoryStep]) -> None:
        await asyncio.to_thread(self.write_sync, workspace_id, steps)

    def read_sync(self, workspace_id: str, memory_id: str) -> list[dict[str, Any]]:
        workspace = validate_workspace_id(workspace_id)
        query = f"SELECT entry FROM {self.db.table('history')} WHERE workspace_id = %s AND memory_id = %s ORDER BY seq"  # noqa: S608,E501
        rows = self.db.run(lambda conn: conn.execute(query, (workspace, memory_id)).fetchall())
        return [HistoryEntry.model_validate(row[0]).model_dump(mode="json") for row in rows]

    async def read(self, workspace_id: str, memory_id: str) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.read_sync, workspace_id, memory_id)


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
