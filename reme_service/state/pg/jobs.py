"""`PgJobStore`: the jobs and their Idempotency-Keys in PostgreSQL, with the interface of `jobs.files.JobFiles`, so
the queue's logic (`jobs.queue.JobQueue`) is the same on one machine and on many.

- `jobs`: one row per job, replaced whole at every change of state, in its own transaction (committed before the
  queue shows the new state: a job seen `done` cannot run again);
- run lock: a session advisory lock of the job, held on a connection of its own for as long as the job runs. It is
  the job's lease: it ends when the holder releases it or when the holder's connection ends (a node killed with -9:
  its kernel closes the socket, PostgreSQL ends the session), so another node's queue (`JobQueue.adopt`, every few
  seconds) claims the job, finds it `running` with nobody holding it, and runs it once more;
- a cancellation (`cancel`: its key revoked, its workspace erased) is kept in the job's row, and every later `save`
  of the job, by any node, writes it cancelled; `began_writing` records that a run reached its first write, so an
  interrupted run is not started again (`JobQueue._orphaned`);
- `job_keys`: which job an Idempotency-Key named, taken by `INSERT ... ON CONFLICT DO NOTHING`, so nodes given the
  same key agree on one job.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import threading

import psycopg
from pydantic import ValidationError

from reme_service.errors import ReMeError
from reme_service.jobs.files import Cancellation
from reme_service.jobs.record import Job
from reme_service.state.pg.db import Conn, StateDb

logger = logging.getLogger("reme_service.jobs")


def _lock_key(prefix: str, job_id: str) -> int:
    digest = hashlib.sha256(f"reme-state-job\x00{prefix}\x00{job_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PgJobStore:
    shared_across_nodes = True

    def __init__(self, db: StateDb) -> None:
        self.db = db
        self._table = db.table("jobs")
        self._keys = db.table("job_keys")
        self._held: dict[int, Conn] = {}
        self._handles = itertools.count(1)
        self._lock = threading.Lock()

    def save(self, job: Job) -> tuple[Job, int]:
        """Write the job's row (committed before this returns); returns the job as written and its size in bytes. A
        job cancelled meanwhile (`cancel`, by any node) is written cancelled instead."""

        def work(conn: Conn) -> tuple[Job, int]:
            row = conn.execute(
                f"SELECT cancellation FROM {self._table} WHERE job_id = %s FOR UPDATE",  # noqa: S608
                (job.job_id,),
            ).fetchone()
            written = job
            if row and row[0] is not None and job.status != "cancelled":
                cancelled = Cancellation.model_validate_json(bytes(row[0]))
                written = job.cancelled(cancelled.reason, http_status=cancelled.http_status, result=cancelled.result)
            return written, self._write(conn, written)

        return self.db.run(work)

    def _write(self, conn: Conn, job: Job) -> int:
        data = job.model_dump_json().encode()
        conn.execute(
            f"INSERT INTO {self._table} (job_id, queued_at, status, body, workspace_id) "  # noqa: S608
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (job_id) DO UPDATE SET status = excluded.status, "
            "body = excluded.body, workspace_id = excluded.workspace_id",
            (job.job_id, job.queued_at, job.status, data, job.workspace_id),
        )
        return len(data)

    def cancelled(self, job_id: str) -> str | None:
        """Why the job was cancelled (None: it was not): a running job asks before each write."""
        query = f"SELECT cancellation FROM {self._table} WHERE job_id = %s"  # noqa: S608
        row = self.db.run(lambda conn: conn.execute(query, (job_id,)).fetchone())
        if not row or row[0] is None:
            return None
        return Cancellation.model_validate_json(bytes(row[0])).reason

    def cancel(self, job_id: str, cancellation: Cancellation, *, scrub_finished: bool = False) -> Job | None:
        """As `JobFiles.cancel`: the job cancelled unless it finished (scrubbed too with `scrub_finished`), in one
        transaction holding its row; the job as it now is (None: no such job)."""

        def work(conn: Conn) -> Job | None:
            row = conn.execute(
                f"SELECT body FROM {self._table} WHERE job_id = %s FOR UPDATE",  # noqa: S608
                (job_id,),
            ).fetchone()
            job = _job(row[0]) if row else None
            if job is None or (job.finished and not scrub_finished):
                return job
            if job.finished:
                job = job.scrubbed(cancellation.reason)
            else:
                conn.execute(
                    f"UPDATE {self._table} SET cancellation = %s WHERE job_id = %s",  # noqa: S608
                    (cancellation.model_dump_json().encode(), job_id),
                )
                job = job.cancelled(
                    cancellation.reason, http_status=cancellation.http_status, result=cancellation.result
                )
            self._write(conn, job)
            return job

        return self.db.run(work)

    def erase_workspace(self, workspace_id: str, cancellation: Cancellation, *, skip: str | None = None) -> list[Job]:
        """Every job of `workspace_id` but `skip` cancelled or, when finished, scrubbed (`cancel`); the jobs as they
        now are. (Rows written before the workspace column are read to find theirs.)"""
        query = f"SELECT job_id, body FROM {self._table} WHERE workspace_id IN (%s, '')"  # noqa: S608
        rows = self.db.run(lambda conn: conn.execute(query, (workspace_id,)).fetchall())
        erased = []
        for job_id, body in rows:
            job = _job(body)
            if job is None or job_id == skip or job.workspace_id != workspace_id:
                continue
            if job.reason is not None and not job.request:
                continue  # already scrubbed
            done = self.cancel(job_id, cancellation, scrub_finished=True)
            if done is not None:
                erased.append(done)
        return erased

    def mark_writing(self, job_id: str) -> None:
        """Record, committed, that the job begins its first write (`began_writing`)."""
        query = f"UPDATE {self._table} SET began_writing = true WHERE job_id = %s"  # noqa: S608
        self.db.run(lambda conn: conn.execute(query, (job_id,)))

    def began_writing(self, job_id: str) -> bool:
        query = f"SELECT began_writing FROM {self._table} WHERE job_id = %s"  # noqa: S608
        row = self.db.run(lambda conn: conn.execute(query, (job_id,)).fetchone())
        return bool(row and row[0])

    def size(self, job_id: str) -> int:
        query = f"SELECT octet_length(body) FROM {self._table} WHERE job_id = %s"  # noqa: S608
        row = self.db.run(lambda conn: conn.execute(query, (job_id,)).fetchone())
        return int(row[0]) if row else 0

    def load(self, job_id: str) -> Job | None:
        query = f"SELECT body FROM {self._table} WHERE job_id = %s"  # noqa: S608
        row = self.db.run(lambda conn: conn.execute(query, (job_id,)).fetchone())
        return _job(row[0]) if row else None

    def remove(self, job: Job) -> None:
        def work(conn: Conn) -> None:
            conn.execute(f"DELETE FROM {self._table} WHERE job_id = %s", (job.job_id,))  # noqa: S608
            conn.execute(f"DELETE FROM {self._keys} WHERE job_id = %s", (job.job_id,))  # noqa: S608

        self.db.run(work)

    def claim(self, job_id: str) -> int | None:
        """Hold the job's run lock (a handle to `release`), or None when another node holds it (or the database
        cannot be reached: nobody runs it now, a later `adopt` will)."""
        try:
            conn = self.db.connect()
        except ReMeError as exc:
            logger.warning("jobs: cannot claim %s now: %s", job_id, exc.message)
            return None
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (_lock_key(self.db.prefix, job_id),)).fetchone()
        except psycopg.Error:
            conn.close()
            return None
        if not row or not row[0]:
            conn.close()
            return None
        with self._lock:
            handle = next(self._handles)
            self._held[handle] = conn
        return handle

    def release(self, handle: int) -> None:
        with self._lock:
            conn = self._held.pop(handle, None)
        if conn is not None:
            conn.close()  # the session ends, and its advisory lock with it

    def reserve_key(self, digest: str, job_id: str) -> str:
        def work(conn: Conn) -> str:
            conn.execute(
                f"INSERT INTO {self._keys} (digest, job_id) VALUES (%s, %s) ON CONFLICT (digest) DO NOTHING",  # noqa: S608
                (digest, job_id),
            )
            row = conn.execute(f"SELECT job_id FROM {self._keys} WHERE digest = %s", (digest,)).fetchone()  # noqa: S608
            return str(row[0]) if row else job_id

        return self.db.run(work)

    def key_holder(self, digest: str) -> str | None:
        query = f"SELECT job_id FROM {self._keys} WHERE digest = %s"  # noqa: S608
        row = self.db.run(lambda conn: conn.execute(query, (digest,)).fetchone())
        return str(row[0]) if row else None

    def _select(self, where: str) -> list[Job]:
        query = f"SELECT body FROM {self._table} {where} ORDER BY queued_at"  # noqa: S608
        rows = self.db.run(lambda conn: conn.execute(query).fetchall())
        return [job for job in (_job(row[0]) for row in rows) if job is not None]

    def load_all(self) -> list[Job]:
        return self._select("")

    def load_open(self) -> list[Job]:
        """The jobs queued or running, oldest first (what another node may have left to run)."""
        return self._select("WHERE status IN ('queued', 'running')")


def _job(body: bytes) -> Job | None:
    try:
        return Job.model_validate_json(bytes(body))
    except (ValidationError, ValueError) as exc:
        logger.error("a job row is unreadable, skipped: %s", exc)
        return None
