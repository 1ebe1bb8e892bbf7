"""The state's tables, created and migrated when a node first connects: versioned, idempotent, and safe when several
nodes start at once (the migration holds a transaction-level advisory lock: one node migrates, the others wait for
it and then find the version current).

Tables (`<prefix>` is `state.table_prefix`): `schema` (the version), `keys` (API keys, hashed), `audit` (append
only: a trigger refuses UPDATE and DELETE), `history` (one row per entry), `jobs` and `job_keys` (the queue and the
Idempotency-Keys), `buckets` (rate limits), `working_files` (the working-memory files, `pg.working`) and
`imported` (the files `reme state migrate` copied). `files`, made by the first version for the working-memory
files, was never used: `working_files` holds them.
"""

from __future__ import annotations

import hashlib
from typing import Any

from psycopg import Connection, sql


def _lock_key(prefix: str) -> int:
    digest = hashlib.sha256(f"reme-state-schema\x00{prefix}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


MIGRATIONS: tuple[str, ...] = (
    # 1: everything the first release of the PostgreSQL state keeps
    """
    CREATE TABLE IF NOT EXISTS {p}keys (
        id text PRIMARY KEY, name text NOT NULL DEFAULT '', scope text NOT NULL, workspaces text[] NOT NULL,
        created timestamptz NOT NULL, sha256 text NOT NULL, revoked timestamptz, last_used timestamptz);
    CREATE TABLE IF NOT EXISTS {p}audit (
        seq bigserial PRIMARY KEY, time timestamptz NOT NULL, workspace_id text NOT NULL, record jsonb NOT NULL);
    CREATE INDEX IF NOT EXISTS {p}audit_time ON {p}audit (time);
    CREATE OR REPLACE FUNCTION {p}audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'the audit trail is append-only'; END $$;
    DROP TRIGGER IF EXISTS {p}audit_append_only ON {p}audit;
    CREATE TRIGGER {p}audit_append_only BEFORE UPDATE OR DELETE ON {p}audit
        FOR EACH ROW EXECUTE FUNCTION {p}audit_append_only();
    CREATE TABLE IF NOT EXISTS {p}history (
        seq bigserial PRIMARY KEY, workspace_id text NOT NULL, memory_id text NOT NULL, entry jsonb NOT NULL);
    CREATE INDEX IF NOT EXISTS {p}history_memory ON {p}history (workspace_id, memory_id, seq);
    CREATE TABLE IF NOT EXISTS {p}jobs (
        job_id text PRIMARY KEY, queued_at timestamptz NOT NULL, status text NOT NULL, body bytea NOT NULL);
    CREATE INDEX IF NOT EXISTS {p}jobs_open ON {p}jobs (queued_at) WHERE status IN ('queued', 'running');
    CREATE TABLE IF NOT EXISTS {p}job_keys (digest text PRIMARY KEY, job_id text NOT NULL);
    CREATE TABLE IF NOT EXISTS {p}buckets (key_id text PRIMARY KEY, tokens float8 NOT NULL, stamp float8 NOT NULL);
    CREATE TABLE IF NOT EXISTS {p}files (
        path text PRIMARY KEY, content bytea NOT NULL, updated timestamptz NOT NULL DEFAULT now());
    """,
    # 2: which files `reme state migrate` copied (each once, in the transaction of its rows)
    """
    CREATE TABLE IF NOT EXISTS {p}imported (source text PRIMARY KEY, at timestamptz NOT NULL DEFAULT now());
    """,
    # 3: what reaches a job after it was queued: its workspace (to erase it), its cancellation (a revoked key, an
    # erased workspace: honoured by every later save), and whether its first write began (never run twice)
    """
    ALTER TABLE {p}jobs ADD COLUMN IF NOT EXISTS workspace_id text NOT NULL DEFAULT '';
    ALTER TABLE {p}jobs ADD COLUMN IF NOT EXISTS cancellation bytea;
    ALTER TABLE {p}jobs ADD COLUMN IF NOT EXISTS began_writing boolean NOT NULL DEFAULT false;
    CREATE INDEX IF NOT EXISTS {p}jobs_workspace ON {p}jobs (workspace_id);
    """,
    # 4: whether a rate-limit bucket's last take was granted (`pg.buckets`: told back by the statement that took it)
    """
    ALTER TABLE {p}buckets ADD COLUMN IF NOT EXISTS granted boolean NOT NULL DEFAULT true;
    """,
    # 5: the working-memory files (`pg.working`): a row per file, by workspace folder and path inside it (byte order,
    # so the primary key's index serves the prefix searches of a folder's files)
    """
    CREATE TABLE IF NOT EXISTS {p}working_files (
        folder text COLLATE "C" NOT NULL, path text COLLATE "C" NOT NULL, content bytea NOT NULL, size bigint NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (folder, path));
    """,
    # 6: an audit row's request trail token: drafts of a request's record committed with its writes (`pg/records`)
    """
    ALTER TABLE {p}audit ADD COLUMN IF NOT EXISTS trail text;
    CREATE INDEX IF NOT EXISTS {p}audit_trail ON {p}audit (trail, seq) WHERE trail IS NOT NULL;
    """,
)


def migrate(conn: Connection[Any], prefix: str) -> int:
    """Bring the schema to the last version (in one transaction, under the advisory lock); returns that version."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(prefix),))
        conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (version int NOT NULL)").format(sql.Identifier(f"{prefix}schema"))
        )
        row = conn.execute(sql.SQL("SELECT max(version) FROM {}").format(sql.Identifier(f"{prefix}schema"))).fetchone()
        current = int(row[0]) if row and row[0] is not None else 0
        for version, script in enumerate(MIGRATIONS, start=1):
            if version <= current:
                continue
            conn.execute(script.replace("{p}", prefix).encode())  # the prefix is validated (`StateConfig`)
            conn.execute(
                sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(sql.Identifier(f"{prefix}schema")), (version,)
            )
        return len(MIGRATIONS)
