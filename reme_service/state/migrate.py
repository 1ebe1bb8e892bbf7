"""`reme state migrate [config args]`: copy a one-machine deployment's state from its files into PostgreSQL.

The files are those the configuration names (`data_dir`, `auth.keys_file`, `audit.dir`, `history.dir`,
`jobs.dir`, `working_memory_dir`); PostgreSQL is the one `state.dsn` (or the pgvector store) names. Copied: the API
keys (with when each was last used; a key already in the table is left as it is), the audit trail and the history
(each file in one transaction together with a mark in `<prefix>imported`, so running the command again copies
nothing twice), the jobs not finished yet with their Idempotency-Keys (a job already in the table is left as it
is), and the working-memory files (every regular file under the root but the temp files of an interrupted write,
byte for byte; a file already in the table is left as it is). Nothing is removed from the files. Run it with the
service stopped, then start the nodes with `state.backend: postgres`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson
from psycopg.types.json import Jsonb

from reme_service.audit.record import AuditRecord
from reme_service.auth.access import keys_path
from reme_service.auth.keyfile import read_key_file, read_last_used
from reme_service.config.loader import load_config
from reme_service.config.models import AppConfig
from reme_service.errors import ReMeError
from reme_service.jobs.files import JobFiles, key_digest
from reme_service.schema.workspace_ids import workspace_from_file_name
from reme_service.state.pg.db import Conn, StateDb
from reme_service.state.pg.jobs import PgJobStore
from reme_service.state.pg.keys import insert_key
from reme_service.state.pg.working import PgWorkingStore
from reme_service.state.settings import StateTarget, files_folder, state_target

USAGE = """usage: reme state migrate [config args]

Copies the keys, audit trail, history, unfinished jobs and working-memory files under data_dir into the PostgreSQL
state (state.dsn, or the pgvector store's). Safe to run again: nothing is copied twice. Config args are those of
`reme`.
"""


@dataclass
class Copied:
    keys: int = 0
    audit: int = 0
    history: int = 0
    jobs: int = 0
    working_files: int = 0


def _once(db: StateDb, source: str, rows: Sequence[tuple[str, Sequence[object]]]) -> int:
    """Insert `rows` ((query, args) each) and mark `source` copied, in one transaction; 0 when it was copied."""

    def work(conn: Conn) -> int:
        marked = conn.execute(
            f"INSERT INTO {db.table('imported')} (source) VALUES (%s) ON CONFLICT DO NOTHING",  # noqa: S608
            (source,),
        )
        if marked.rowcount != 1:
            return 0
        for query, args in rows:
            conn.execute(query.encode(), args)  # the query is built from the validated prefix
        return len(rows)

    return db.run(work)


def migrate_files(config: AppConfig, target: StateTarget) -> Copied:
    data_dir = Path(config.data_dir).expanduser().resolve()
    db = StateDb(target, max_size=1)
    copied = Copied()
    try:
        db.ready()
        path = keys_path(config.auth, data_dir)
        used = read_last_used(path)
        for record in read_key_file(path).keys:
            copied.keys += insert_key(db, record, used.get(record.id))
        audit_insert = f"INSERT INTO {db.table('audit')} (time, workspace_id, record) VALUES (%s, %s, %s)"  # noqa: S608
        audit_dir = files_folder(config.audit.dir, data_dir, "audit")
        for file in sorted(audit_dir.glob("*.jsonl")) if audit_dir.is_dir() else []:
            rows = [
                (audit_insert, (r.time, r.workspace_id, Jsonb(r.model_dump(mode="json"))))
                for r in read_records_of(file)
            ]
            copied.audit += _once(db, f"audit:{file}", rows)
        history_insert = f"INSERT INTO {db.table('history')} (workspace_id, memory_id, entry) VALUES (%s, %s, %s)"  # noqa: S608
        history_dir = files_folder(config.history.dir, data_dir, "history")
        for file in sorted(history_dir.glob("*.jsonl")) if history_dir.is_dir() else []:
            workspace = workspace_from_file_name(file.stem)
            if workspace is None:
                sys.stderr.write(f"reme state migrate: {file.name} names no workspace (a shortened name); skipped\n")
                continue
            entries = [_entry(line) for line in file.read_bytes().splitlines()]
            history_rows = [(history_insert, (workspace, e["memory_id"], Jsonb(e))) for e in entries if e is not None]
            copied.history += _once(db, f"history:{file}", history_rows)
        jobs = PgJobStore(db)
        for job in JobFiles(files_folder(config.jobs.dir, data_dir, "jobs")).load_open():
            if jobs.load(job.job_id) is not None:
                continue
            jobs.save(job)
            if job.idempotency_key is not None:
                jobs.reserve_key(key_digest(job.caller.key_id, job.idempotency_key), job.job_id)
            copied.jobs += 1
        copied.working_files = PgWorkingStore(db, config.working_memory_root).import_files(
            working_files(config.working_memory_root)
        )
    finally:
        db.close()
    return copied


def working_files(root: Path) -> Iterator[tuple[tuple[str, ...], bytes]]:
    """Every regular file under `root` (symlinks not followed) as (its path's parts under the root, its bytes),
    but the temp files a write left when it was interrupted (`.<name>.<random>.tmp`)."""
    for folder, _, names in os.walk(root):
        for name in sorted(names):
            path = Path(folder) / name
            if (name.startswith(".") and name.endswith(".tmp")) or not path.is_file() or path.is_symlink():
                continue
            yield path.relative_to(root).parts, path.read_bytes()


def read_records_of(file: Path) -> list[AuditRecord]:
    """The audit records of one day's file (a torn last line of a crashed append is skipped)."""
    lines = file.read_bytes().split(b"\n")[:-1]  # what follows the last newline is torn
    return [AuditRecord.model_validate(orjson.loads(line)) for line in lines if line]


def _entry(line: bytes) -> dict[str, object] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None  # a torn line of a crashed append
    return value if isinstance(value, dict) and "memory_id" in value else None


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if not args or args[0] != "migrate" or any(a in ("-h", "--help", "help") for a in args):
        sys.stdout.write(USAGE)
        return 0 if args and args[0] != "migrate" and any(a in ("-h", "--help", "help") for a in args) else 2
    try:
        config = load_config(args[1:])
        target = state_target(config.model_copy(update={"state": config.state.model_copy(update={"backend": "auto"})}))
        if target.backend != "postgres":
            sys.stderr.write(
                "reme state migrate: no PostgreSQL to copy into: set state.dsn (or use a pgvector store)\n"
            )
            return 2
        copied = migrate_files(config, target)
    except ReMeError as exc:
        sys.stderr.write(f"reme state migrate: {exc.message}\n")
        return 2
    sys.stdout.write(
        f"copied {copied.keys} keys, {copied.audit} audit records, {copied.history} history entries and "
        f"{copied.jobs} unfinished jobs into PostgreSQL, and {copied.working_files} working-memory files\n"
    )
    return 0
