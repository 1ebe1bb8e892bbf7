"""The service's live view of the key file: authenticates presented keys, sees changes within `reload_seconds`.

The file is checked (one `stat`) at most every `reload_seconds` on the request path, and read again when its
inode, size or modification time changed, so a key revoked by `reme keys` in another process is refused within
`reload_seconds`. A key the ring does not know is looked up again at once (one more `stat`, and a read only if
the file changed), so a key created by `reme keys` counts from the first request that presents it. At start an
unreadable file stops the service (`ConfigError`); later, a file that became unreadable fails closed: every keyed
request gets 503 until it is repaired (the last good copy is not used, since it may hold a key that was meant to
be revoked).

When each key was last used is kept in memory and written to `last_used.json` beside the key file by `flush`
(the app calls it every few seconds and at stop), never on the request path.
"""

from __future__ import annotations

import hmac
import logging
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from reme_service.auth.caller import Caller
from reme_service.auth.keyfile import (
    KeyFile,
    KeyRecord,
    hash_key,
    parse_key,
    read_key_file,
    read_last_used,
    write_last_used,
)
from reme_service.errors import ConfigError, HTTPStatusError, UnauthorizedError

logger = logging.getLogger("reme_service.auth")

_Stamp = tuple[int, int, int] | None


class KeyRing:
    def __init__(self, path: Path, *, reload_seconds: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.reload_seconds = reload_seconds
        self._clock = clock
        self._keys = KeyFile()
        self._stamp: _Stamp = None
        self._checked = float("-inf")
        self._broken: str | None = None
        self._used: dict[str, datetime] = {}
        self._dirty = False

    @property
    def where(self) -> str:
        return str(self.path)

    def _stat(self) -> _Stamp:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns)

    def load(self) -> None:
        """Read the file now; ConfigError when it is unreadable (the service then refuses to start)."""
        stamp = self._stat()
        self._keys = read_key_file(self.path)
        self._stamp = stamp
        self._checked = self._clock()
        self._broken = None
        self._used = read_last_used(self.path)

    def refresh(self, *, now: bool = False) -> None:
        """Re-read the file if it changed and `reload_seconds` passed since the last look (`now`: whatever the time)."""
        moment = self._clock()
        if not now and moment - self._checked < self.reload_seconds:
            return
        self._checked = moment
        stamp = self._stat()
        if stamp == self._stamp and self._broken is None:
            return
        try:
            self._keys = read_key_file(self.path)
        except ConfigError as exc:
            if self._broken != exc.message:
                logger.error("%s; keyed requests get 503 until it is repaired", exc.message)
            self._broken = exc.message
            return
        if self._broken is not None:
            logger.info("auth: the key file is readable again")
        self._broken = None
        self._stamp = stamp

    def unavailable(self) -> str | None:
        """Always None: a key file that cannot be read keeps checking on (`has_keys`), and its keys are refused."""
        return None

    def has_keys(self) -> bool:
        """Whether the file holds any key, revoked ones included (or is broken: then the answer must be yes, so
        that checking stays on). Revoking the last key must not open a service that keys had closed."""
        self.refresh()
        return self._broken is not None or bool(self._keys.keys)

    def has_active_keys(self) -> bool:
        self.refresh()
        return self._broken is None and any(record.active for record in self._keys.keys)

    def waits(self, key: str) -> bool:
        """Never: a `stat`, and a read when the file changed, are cheap enough for the event loop."""
        return False

    def _find(self, key_id: str, *, now: bool) -> KeyRecord | None:
        self.refresh(now=now)
        if self._broken is not None:
            raise HTTPStatusError("API keys cannot be checked now (see the server log)", status=503, code="unavailable")
        return self._keys.find(key_id)

    def authenticate(self, key: str) -> Caller:
        """The caller `key` stands for; 401 for a malformed, unknown or revoked key, 503 if the file is broken."""
        key_id = parse_key(key)
        record = self._find(key_id, now=False) if key_id else None
        if record is None and key_id:  # perhaps created since the last look
            record = self._find(key_id, now=True)
        if record is None or not hmac.compare_digest(record.sha256, hash_key(key)):
            raise UnauthorizedError("unknown API key")
        if not record.active:
            raise UnauthorizedError("this API key was revoked")
        self._used[record.id] = datetime.now(UTC)
        self._dirty = True
        return record.caller()

    def current(self, key_id: str) -> Caller | None:
        """The caller key `key_id` stands for as the file says now (reloaded if it changed); None when the key is
        revoked or gone, or the file is broken. For re-checking a caller resolved earlier (`Access.still_valid`)."""
        self.refresh()
        if self._broken is not None:
            return None
        record = self._keys.find(key_id)
        return record.caller() if record is not None and record.active else None

    def flush(self) -> None:
        """Write when each key was last used (blocking: call it in a worker thread)."""
        if not self._dirty:
            return
        self._dirty = False
        try:
            write_last_used(self.path, dict(self._used))
        except OSError as exc:
            logger.warning("auth: could not record when keys were last used: %s", exc)
