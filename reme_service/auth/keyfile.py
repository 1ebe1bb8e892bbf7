"""The key file: API keys bound to workspaces, stored hashed, changed atomically under a lock.

A key reads `rk_<id>_<secret>`: `id` is 12 hex digits, public (it names the key in lists, logs and the audit log),
`secret` 32 random bytes in URL-safe base64. The file keeps the SHA-256 of the whole key, never the key: the
secret has 256 bits of entropy, so a fast hash is as safe as a slow one and keeps checking a request cheap.

`<keys_file>` is JSON (`KeyFile`), replaced atomically (`durable.atomic_write`) by `create_key` / `revoke_key`,
which hold an exclusive `flock` on `<keys_file>.lock` for their read-modify-write, so two `reme keys` commands
cannot lose each other's change. When each key was last used lives beside it in `last_used.json`, written by the
service (`KeyRing`), so the service never rewrites the key file itself.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reme_service.auth.caller import ALL_WORKSPACES, Caller, Scope
from reme_service.durable import atomic_write, exclusive_lock
from reme_service.errors import ConfigError, StoreError

KEY_PATTERN = re.compile(r"rk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
LAST_USED_FILE = "last_used.json"


class KeyRecord(BaseModel):
    """One key as stored: everything but the key itself."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[0-9a-f]{12}$")
    name: str = ""
    scope: Scope
    workspaces: list[str] = Field(min_length=1)
    created: datetime
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    revoked: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked is None

    def caller(self) -> Caller:
        return Caller(key_id=self.id, name=self.name, scope=self.scope, workspaces=tuple(self.workspaces))


class KeyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    keys: list[KeyRecord] = Field(default_factory=list)

    def find(self, key_id: str) -> KeyRecord | None:
        return next((record for record in self.keys if record.id == key_id), None)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def parse_key(key: str) -> str | None:
    """The id of a well-formed key, else None."""
    match = KEY_PATTERN.fullmatch(key)
    return match.group(1) if match else None


def read_key_file(path: Path) -> KeyFile:
    """The key file at `path`; an absent file has no keys. ConfigError (naming the file) when it is unreadable."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return KeyFile()
    except OSError as exc:
        raise ConfigError(f"auth: cannot read the key file {path}: {exc.strerror}") from None
    try:
        return KeyFile.model_validate(orjson.loads(raw))
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"auth: the key file {path} is not valid JSON ({exc}); restore it or remove it") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"auth: the key file {path} is invalid at {where}: {first['msg']}") from None


def _write(path: Path, keys: KeyFile) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, [orjson.dumps(keys.model_dump(mode="json"), option=orjson.OPT_INDENT_2), b"\n"])


def create_key(path: Path, *, workspaces: Sequence[str], scope: Scope, name: str = "") -> tuple[KeyRecord, str]:
    """Add a new key; returns its record and the key itself (shown once, stored nowhere)."""
    if not workspaces:
        raise ValueError("a key needs at least one --workspace")
    if ALL_WORKSPACES in workspaces and scope != "admin":
        raise ValueError("--workspace '*' (every workspace) is only for --scope admin")
    with exclusive_lock(path.with_name(path.name + ".lock")):
        keys = read_key_file(path)
        key_id = secrets.token_hex(6)
        while keys.find(key_id) is not None:
            key_id = secrets.token_hex(6)
        key = f"rk_{key_id}_{secrets.token_urlsafe(32)}"
        record = KeyRecord(
            id=key_id,
            name=name,
            scope=scope,
            workspaces=list(dict.fromkeys(workspaces)),
            created=datetime.now(UTC),
            sha256=hash_key(key),
        )
        keys.keys.append(record)
        _write(path, keys)
    return record, key


def revoke_key(path: Path, key_id: str) -> KeyRecord:
    """Mark the key revoked (it stays listed). KeyError when there is no such key."""
    with exclusive_lock(path.with_name(path.name + ".lock")):
        keys = read_key_file(path)
        record = keys.find(key_id)
        if record is None:
            raise KeyError(key_id)
        if record.revoked is None:
            record.revoked = datetime.now(UTC)
            _write(path, keys)
    return record


def read_last_used(path: Path) -> dict[str, datetime]:
    """When each key was last used, as the service recorded it (absent or unreadable: nothing known)."""
    try:
        raw = orjson.loads((path.parent / LAST_USED_FILE).read_bytes())
        return {str(key): datetime.fromisoformat(value) for key, value in dict(raw).items()}
    except (OSError, ValueError, TypeError):
        return {}


def write_last_used(path: Path, used: dict[str, datetime]) -> None:
    payload = {key: moment.isoformat() for key, moment in used.items()}
    atomic_write(path.parent / LAST_USED_FILE, [orjson.dumps(payload)])


def keys_unreadable() -> StoreError:
    """What a request gets while a shared key table cannot be read (`state.pg.keys.PgKeyRing`): a 503, keyless or
    not, since whether a key is needed cannot be known."""
    return StoreError("the state database is unreachable, so API keys cannot be checked now; retry shortly")
