"""API keys in PostgreSQL: `PgKeyRing` (what a node authenticates against) and the `reme keys` operations.

A node keeps the keys in memory and reads the table again whenever a key changes (the change's transaction sends a
NOTIFY on `<prefix>keys`, heard by a listener thread of each node) and at least every `state.reload_seconds`
(the fallback when a notification is lost, e.g. while the listener reconnects), so a revocation made on any node,
or by `reme keys revoke` anywhere, counts on every node within that time. A key the node does not know is looked
up in the table at once (a client may use a new key on another node before that node heard of it), at most
`LOOKUPS_PER_SECOND` times a second per node, so that made-up keys cannot turn into a query each. While the table
cannot be read, keyed requests fail closed with 503 (a key revoked meanwhile must not keep working). When each key
was last used is written by `flush` (every few seconds), never on the request path.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import psycopg

from reme_service.auth.caller import ALL_WORKSPACES, Caller, Scope
from reme_service.auth.keyfile import KeyRecord, hash_key, keys_unreadable, parse_key
from reme_service.auth.rate_limit import RateLimiter
from reme_service.errors import ReMeError, UnauthorizedError
from reme_service.state.pg.db import Conn, StateDb

logger = logging.getLogger("reme_service.state")
CHANNEL = "keys"
COLUMNS = "id, name, scope, workspaces, created, sha256, revoked, last_used"
LOOKUPS_PER_SECOND = 20


def _record(row: tuple[object, ...]) -> tuple[KeyRecord, datetime | None]:
    key_id, name, scope, workspaces, created, sha256, revoked, last_used = row
    record = KeyRecord.model_validate(
        {"id": key_id, "name": name, "scope": scope, "workspaces": list(workspaces),  # type: ignore[call-overload]
         "created": created, "sha256": sha256, "revoked": revoked}
    )  # fmt: skip
    return record, last_used  # type: ignore[return-value]


def _read_key(conn: Conn, table: str, key_id: str) -> KeyRecord | None:
    row = conn.execute(f"SELECT {COLUMNS} FROM {table} WHERE id = %s", (key_id,)).fetchone()  # noqa: S608
    return None if row is None else _record(row)[0]


def read_keys(db: StateDb) -> list[tuple[KeyRecord, datetime | None]]:
    """Every key (revoked ones too) with when it was last used, oldest first."""
    query = f"SELECT {COLUMNS} FROM {db.table('keys')} ORDER BY created, id"  # noqa: S608 - validated prefix
    return db.run(lambda conn: [_record(row) for row in conn.execute(query).fetchall()])


def create_key(db: StateDb, *, workspaces: Sequence[str], scope: Scope, name: str = "") -> tuple[KeyRecord, str]:
    """Add a new key; returns its record and the key itself (shown once, stored nowhere)."""
    if not workspaces:
        raise ValueError("a key needs at least one --workspace")
    if ALL_WORKSPACES in workspaces and scope != "admin":
        raise ValueError("--workspace '*' (every workspace) is only for --scope admin")
    key_id = secrets.token_hex(6)
    key = f"rk_{key_id}_{secrets.token_urlsafe(32)}"
    record = KeyRecord(
        id=key_id, name=name, scope=scope, workspaces=list(dict.fromkeys(workspaces)),
        created=datetime.now(UTC), sha256=hash_key(key),
    )  # fmt: skip
    insert_key(db, record)
    return record, key


def insert_key(db: StateDb, record: KeyRecord, last_used: datetime | None = None) -> bool:
    """Store `record` as it is (False when a key of its id exists: left unchanged); tells every node."""

    def work(conn: Conn) -> bool:
        cursor = conn.execute(
            f"INSERT INTO {db.table('keys')} ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "  # noqa: S608
            "ON CONFLICT (id) DO NOTHING",
            (record.id, record.name, record.scope, record.workspaces, record.created, record.sha256,
             record.revoked, last_used),
        )  # fmt: skip
        db.notify(conn, CHANNEL, record.id)
        return cursor.rowcount == 1

    return db.run(work)


def revoke_key(db: StateDb, key_id: str) -> KeyRecord:
    """Mark the key revoked (it stays listed) and tell every node. KeyError when there is no such key."""

    def work(conn: Conn) -> KeyRecord:
        table = db.table("keys")
        conn.execute(f"UPDATE {table} SET revoked = now() WHERE id = %s AND revoked IS NULL", (key_id,))  # noqa: S608
        record = _read_key(conn, table, key_id)
        if record is None:
            raise KeyError(key_id)
        db.notify(conn, CHANNEL, key_id)
        return record

    return db.run(work)


class PgKeyRing:
    """The keys of the table, as this node knows them (see the module's docstring)."""

    def __init__(
        self, db: StateDb, *, reload_seconds: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.db = db
        self.reload_seconds = reload_seconds
        self._keys: dict[str, KeyRecord] = {}
        self._lookups = RateLimiter(LOOKUPS_PER_SECOND, LOOKUPS_PER_SECOND, clock=clock)
        self._broken: str | None = "the keys were not read yet"
        self._used: dict[str, datetime] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.generation = 0  # reads of the table so far (tests wait on it)

    @property
    def where(self) -> str:
        return f"the PostgreSQL table {self.db.table('keys')}"

    def load(self) -> None:
        """Read the table now (a failure is remembered: keyed requests get 503 until it can be read), and start
        following its changes."""
        self._reload()
        self._follow()

    def _reload(self) -> None:
        try:
            keys = {record.id: record for record, _ in read_keys(self.db)}
        except ReMeError as exc:
            if self._broken != exc.message:
                logger.error("auth: %s; keyed requests get 503 until it is back", exc.message)
            self._broken = exc.message
            return
        with self._lock:
            if self._broken is not None and self.generation:
                logger.info("auth: the keys can be read again")
            self._keys, self._broken = keys, None
            self.generation += 1

    def _follow(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._listen, name="reme-state-keys", daemon=True)
            self._thread.start()

    def _listen(self) -> None:
        """LISTEN for changes, reading the table at each one and every `reload_seconds` anyway; reconnect on loss."""
        while not self._stop.is_set():
            try:
                with self.db.connect() as conn:
                    conn.execute(f"LISTEN {self.db.channel(CHANNEL)}")
                    self._reload()  # what changed while not listening
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=self.reload_seconds, stop_after=1):
                            pass
                        self._reload()
            except (ReMeError, psycopg.Error):
                self._reload()  # marks the ring broken while the database is away
                self._stop.wait(self.reload_seconds)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def has_keys(self) -> bool:
        return self._broken is not None or bool(self._keys)

    def unavailable(self) -> str | None:
        return self._broken

    def has_active_keys(self) -> bool:
        """Whether a key may serve: yes while the table cannot be read (a node whose database is down starts, and
        answers 503 until it is back, instead of refusing to start for want of keys it cannot see)."""
        return self._broken is not None or any(record.active for record in self._keys.values())

    def authenticate(self, key: str) -> Caller:
        """The caller `key` stands for; 401 for a malformed, unknown or revoked key, 503 while the table cannot be
        read."""
        if self._broken is not None:
            raise keys_unreadable()
        key_id = parse_key(key)
        record = self._keys.get(key_id) if key_id else None
        if record is None and key_id:
            record = self._look_up(key_id)
        if record is None or not hmac.compare_digest(record.sha256, hash_key(key)):
            raise UnauthorizedError("unknown API key")
        if not record.active:
            raise UnauthorizedError("this API key was revoked")
        self._used[record.id] = datetime.now(UTC)
        return record.caller()

    def waits(self, key: str) -> bool:
        """Whether `key` is a well-formed key this node does not know: `authenticate` then looks it up in the table."""
        key_id = parse_key(key)
        return key_id is not None and key_id not in self._keys

    def _look_up(self, key_id: str) -> KeyRecord | None:
        """Key `key_id` as the table has it now (None: no such key, or the lookups' rate is spent)."""
        with self._lock:
            if self._lookups.wait("unknown") > 0:
                return None
        table = self.db.table("keys")
        try:
            record = self.db.run(lambda conn: _read_key(conn, table, key_id))
        except ReMeError:
            raise keys_unreadable() from None
        if record is None:
            return None
        with self._lock:
            self._keys = {**self._keys, record.id: record}  # until the listener's next read replaces them all
        return record

    def current(self, key_id: str) -> Caller | None:
        if self._broken is not None:
            return None
        record = self._keys.get(key_id)
        return record.caller() if record is not None and record.active else None

    def flush(self) -> None:
        """Write when each key was last used (blocking: call it in a worker thread)."""
        used, self._used = self._used, {}
        if not used:
            return
        table = self.db.table("keys")
        query = f"UPDATE {table} SET last_used = greatest(last_used, %s) WHERE id = %s"  # noqa: S608
        try:
            self.db.run(lambda conn: conn.cursor().executemany(query, [(when, key) for key, when in used.items()]))
        except ReMeError as exc:
            logger.warning("auth: could not record when keys were last used: %s", exc.message)
