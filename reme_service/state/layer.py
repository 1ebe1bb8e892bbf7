"""`StateLayer`: the state backend a configuration selects (`state.settings.state_target`), as the objects the app
wires in: the key ring, the audit sink, the history store, the job store and the working-memory files, plus the
event fan-out and the rate-limit buckets.

`files` gives today's objects (key file, JSONL logs, job files under data_dir, working-memory folders under
`working_memory_dir`: one machine, `http.workers` processes included); `postgres` gives the `state/pg/` ones on
one database shared by every node. Nothing connects before `StateLayer.start`, except the key ring's first read
(a node whose database is down starts, and its keyed requests get 503 until the database is back).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reme_service.audit.log import AuditLog
from reme_service.auth.access import keys_path
from reme_service.auth.keyring import KeyRing
from reme_service.config.models import AppConfig, AuthConfig
from reme_service.errors import ConfigError, ReMeError
from reme_service.events.bus import EventBus
from reme_service.history.log import HistoryLog
from reme_service.jobs.files import JobFiles
from reme_service.state.interfaces import AuditSink, HistoryStore, JobStore, KeyStore, RateLimit, WorkingStore
from reme_service.state.settings import StateTarget, files_folder, state_target
from reme_service.state.working_folder import WorkingFolders

if TYPE_CHECKING:  # `state/pg/` needs psycopg (the `pgvector` extra): imported only when PostgreSQL is chosen
    from reme_service.state.pg.db import StateDb
    from reme_service.state.pg.events import PgEventRelay
    from reme_service.state.pg.records import PgJournal


@dataclass
class StateLayer:
    target: StateTarget
    keyring: KeyStore
    audit_log: AuditSink | None
    history: HistoryStore | None
    jobs: JobStore
    working: WorkingStore
    db: StateDb | None = None
    #: history entries and audit drafts for a pgvector store's own write transactions (`GuardedStore.joining`)
    journal: PgJournal | None = None
    _relay: PgEventRelay | None = None

    @classmethod
    def build(cls, config: AppConfig, data_dir: Path) -> StateLayer:
        target = state_target(config)
        if target.backend == "files":
            return cls(
                target,
                keyring=KeyRing(keys_path(config.auth, data_dir), reload_seconds=config.auth.reload_seconds),
                audit_log=AuditLog(files_folder(config.audit.dir, data_dir, "audit")) if config.audit.enabled else None,
                history=HistoryLog(files_folder(config.history.dir, data_dir, "history"))
                if config.history.enabled
                else None,
                jobs=JobFiles(files_folder(config.jobs.dir, data_dir, "jobs")),
                working=WorkingFolders(config.working_memory_root),
            )
        try:
            from reme_service.state.pg.db import StateDb
            from reme_service.state.pg.jobs import PgJobStore
            from reme_service.state.pg.keys import PgKeyRing
            from reme_service.state.pg.records import PgAuditLog, PgHistoryLog, PgJournal
            from reme_service.state.pg.working import PgWorkingStore
        except ImportError as exc:
            raise ConfigError(
                f"state.backend postgres needs psycopg ({exc}): pip install 'reme-service[pgvector]'"
            ) from None
        db = StateDb(target)
        return cls(
            target,
            keyring=PgKeyRing(db, reload_seconds=min(target.reload_seconds, config.auth.reload_seconds)),
            audit_log=PgAuditLog(db) if config.audit.enabled else None,
            history=PgHistoryLog(db) if config.history.enabled else None,
            jobs=PgJobStore(db),
            working=PgWorkingStore(db, config.working_memory_root),
            db=db,
            journal=PgJournal(db, audit=config.audit.enabled)
            if config.history.enabled or config.audit.enabled
            else None,
        )

    def limiter(self, auth: AuthConfig) -> RateLimit | None:
        """The rate limit `auth.rate_limit` asks for, on PostgreSQL's shared buckets; None for the files backend
        (each process keeps its own buckets: `auth.access.local_limiter`) or when there is no limit."""
        limit = auth.rate_limit
        if self.db is None or not limit.requests_per_second:
            return None
        from reme_service.state.pg.buckets import PgRateLimiter

        return PgRateLimiter(self.db, limit.requests_per_second, limit.burst)

    @property
    def shared(self) -> bool:
        """Whether the state is shared by several machines (PostgreSQL)."""
        return self.db is not None

    async def start(self, events: EventBus) -> None:
        """Ready the database (schema migrated) and relay events to the other nodes; a database that is down now
        is not fatal: each use fails with 503 until it is back."""
        if self.db is None:
            return
        try:
            await asyncio.to_thread(self.db.ready)
        except ReMeError:
            pass  # reported by /health and by each use until the database is back
        if events.active:
            from reme_service.state.pg.events import PgEventRelay

            self._relay = PgEventRelay(self.db, events)
            self._relay.start()

    async def stop(self) -> None:
        if self._relay is not None:
            await self._relay.stop()
            self._relay = None
        if self.db is not None:
            from reme_service.state.pg.keys import PgKeyRing

            if isinstance(self.keyring, PgKeyRing):
                await asyncio.to_thread(self.keyring.close)
            await asyncio.to_thread(self.db.close)

    async def health(self) -> dict[str, str]:
        """`{"status": "ok"}`, or `down` with the reason (a PostgreSQL state that cannot be reached)."""
        if self.db is None:
            return {"status": "ok", "backend": "files"}
        try:
            await asyncio.to_thread(self.db.ready)
        except ReMeError as exc:
            return {"status": "down", "backend": "postgres", "reason": exc.message}
        unread = self.keyring.unavailable()
        if unread is not None:  # reachable again, and the keys not re-read yet (within `auth.reload_seconds`)
            return {"status": "down", "backend": "postgres", "reason": f"the API keys are not read yet: {unread}"}
        return {"status": "ok", "backend": "postgres"}
