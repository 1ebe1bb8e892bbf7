"""What `reme keys` and `reme audit` do, on the state backend the configuration selects: the key file and the
audit folder under data_dir (`files`), or the PostgreSQL tables every node shares (`postgres`), so a command run
with any node's config arguments acts on what that node serves."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from reme_service.audit.log import read_records
from reme_service.audit.record import AuditRecord
from reme_service.auth import keyfile
from reme_service.auth.access import keys_path
from reme_service.auth.caller import Scope
from reme_service.auth.keyfile import KeyRecord
from reme_service.config.models import AppConfig
from reme_service.state.settings import files_folder, state_target

if TYPE_CHECKING:  # `state/pg/` needs psycopg (the `pgvector` extra): imported only when PostgreSQL is chosen
    from reme_service.state.pg.db import StateDb


class KeyAdmin(Protocol):
    where: str

    def create(self, *, workspaces: Sequence[str], scope: Scope, name: str = "") -> tuple[KeyRecord, str]: ...

    def list(self) -> list[tuple[KeyRecord, datetime | None]]: ...

    def revoke(self, key_id: str) -> KeyRecord: ...

    def close(self) -> None: ...


class FileKeyAdmin:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    def create(self, *, workspaces: Sequence[str], scope: Scope, name: str = "") -> tuple[KeyRecord, str]:
        return keyfile.create_key(self.path, workspaces=workspaces, scope=scope, name=name)

    def list(self) -> list[tuple[KeyRecord, datetime | None]]:
        used = keyfile.read_last_used(self.path)
        return [(record, used.get(record.id)) for record in keyfile.read_key_file(self.path).keys]

    def revoke(self, key_id: str) -> KeyRecord:
        return keyfile.revoke_key(self.path, key_id)

    def close(self) -> None:
        return None


class PgKeyAdmin:
    def __init__(self, db: StateDb) -> None:
        self.db = db
        self.where = f"PostgreSQL ({db.table('keys')})"

    def create(self, *, workspaces: Sequence[str], scope: Scope, name: str = "") -> tuple[KeyRecord, str]:
        from reme_service.state.pg.keys import create_key

        return create_key(self.db, workspaces=workspaces, scope=scope, name=name)

    def list(self) -> list[tuple[KeyRecord, datetime | None]]:
        from reme_service.state.pg.keys import read_keys

        return read_keys(self.db)

    def revoke(self, key_id: str) -> KeyRecord:
        from reme_service.state.pg.keys import revoke_key

        return revoke_key(self.db, key_id)

    def close(self) -> None:
        self.db.close()


def key_admin(config: AppConfig) -> KeyAdmin:
    target = state_target(config)
    if target.backend == "postgres":
        from reme_service.state.pg.db import StateDb

        return PgKeyAdmin(StateDb(target, max_size=1))
    return FileKeyAdmin(keys_path(config.auth, Path(config.data_dir).expanduser().resolve()))


def audit_records(
    config: AppConfig, *, workspace: str | None = None, since: datetime | None = None, until: datetime | None = None
) -> Iterator[AuditRecord]:
    """The audit records of the configured state, oldest first, of `workspace` (all when None) in [since, until)."""
    target = state_target(config)
    if target.backend == "postgres":
        from reme_service.state.pg.db import StateDb
        from reme_service.state.pg.records import read_audit

        db = StateDb(target, max_size=1)
        try:
            yield from read_audit(db, workspace=workspace, since=since, until=until)
        finally:
            db.close()
        return
    data_dir = Path(config.data_dir).expanduser().resolve()
    directory = files_folder(config.audit.dir, data_dir, "audit")
    for record in read_records(directory):
        if workspace and record.workspace_id != workspace:
            continue
        if (since and record.time < since) or (until and record.time >= until):
            continue
        yield record
