"""Who may call the service: the auth mode, the key ring and the rate limit, turned into a `Caller` per request.

`Access.caller(credentials)` is what the HTTP and MCP edges ask, with the key a request presented (or None):

- checking off (`auth.mode: off`, or `auto` on loopback while no key exists): the trusted caller, whatever was
  presented;
- checking on: no key → 401; a malformed, unknown or revoked key → 401; a known key → its `Caller`, after its rate
  limit (429 with the seconds to wait).

What a long-lived request (an event stream, an MCP SSE session) resolved when it opened is re-checked with
`still_valid` while it lasts, and `until_invalid` waits for that to fail, so revoking a key ends the streams and
sessions it opened within `auth.reload_seconds`.

Keys are required in `auto` mode as soon as the service listens on anything but loopback, and a service that
requires keys refuses to start while the key file has none (there would be nobody it could serve).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from pathlib import Path

from reme_service.auth.caller import TRUSTED, Caller
from reme_service.auth.keyfile import keys_unreadable
from reme_service.auth.keyring import KeyRing
from reme_service.auth.rate_limit import RateLimiter
from reme_service.config.models import AuthConfig
from reme_service.errors import ConfigError, RateLimitedError, UnauthorizedError
from reme_service.state.interfaces import KeyStore, RateLimit

logger = logging.getLogger("reme_service.auth")


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def keys_path(config: AuthConfig, data_dir: Path) -> Path:
    return Path(config.keys_file).expanduser().resolve() if config.keys_file else data_dir / "auth" / "keys.json"


def local_limiter(config: AuthConfig) -> RateLimiter | None:
    """This process's token buckets, as `auth.rate_limit` says (None: no limit)."""
    limit = config.rate_limit
    return RateLimiter(limit.requests_per_second, limit.burst) if limit.requests_per_second else None


class Access:
    def __init__(
        self, config: AuthConfig, keyring: KeyStore, *, host: str | None, limiter: RateLimit | None = None
    ) -> None:
        """`limiter`: the shared state's rate limit (None: this process's, from `config.rate_limit`)."""
        self.config = config
        self.keyring = keyring
        self.host = host
        self.exposed = host is not None and not is_loopback(host)
        self.limiter = limiter if limiter is not None else local_limiter(config)

    @classmethod
    def open(
        cls,
        config: AuthConfig,
        data_dir: Path,
        *,
        host: str | None,
        keyring: KeyStore | None = None,
        limiter: RateLimit | None = None,
    ) -> Access:
        """Read the keys (the key file, or `keyring`: the shared state's) and check the service may start as
        configured; ConfigError says why not. `limiter`: the shared state's rate limit, if any."""
        if keyring is None:
            keyring = KeyRing(keys_path(config, data_dir), reload_seconds=config.reload_seconds)
        keyring.load()
        access = cls(config, keyring, host=host, limiter=limiter)
        if config.mode == "off":
            if access.exposed:
                logger.warning(
                    "auth.mode=off on %s: anyone who reaches the port can read and change every workspace", host
                )
        elif host is not None and (config.mode == "required" or access.exposed) and not keyring.has_active_keys():
            where = "auth.mode=required" if config.mode == "required" else f"the service listens on {host}"
            raise ConfigError(
                f"auth: {where}, so API keys are required, and {keyring.where} holds none. Create one with "
                "`reme keys create --workspace NAME --scope write` (same config arguments as `reme`), "
                "or set auth.mode=off to serve without keys"
            )
        return access

    @property
    def checking(self) -> bool:
        if self.config.mode == "off":
            return False
        return self.config.mode == "required" or self.exposed or self.keyring.has_keys()

    async def admit(self, key: str | None) -> Caller:
        """`caller(key)`, in a worker thread when the rate limit or this key's lookup waits on the database (shared
        state); a key the node knows, with no shared limit, is checked on the loop."""
        blocking = (self.limiter is not None and self.limiter.blocking) or (key is not None and self.keyring.waits(key))
        if blocking and self.checking:
            return await asyncio.to_thread(self.caller, key)
        return self.caller(key)

    def caller(self, key: str | None) -> Caller:
        """The caller `key` stands for, after its rate limit (blocking when that limit is shared: see `admit`)."""
        if not self.checking:
            return TRUSTED
        if key is None:
            if self.keyring.unavailable() is not None:  # open or not is unknown: neither admitted nor told 401
                raise keys_unreadable()
            raise UnauthorizedError(
                "an API key is required: send it as 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
            )
        caller = self.keyring.authenticate(key)
        if self.limiter is not None and caller.key_id is not None:
            wait = self.limiter.wait(caller.key_id)
            if wait > 0:
                seconds = RateLimiter.retry_after(wait)
                raise RateLimitedError(f"rate limit of this API key reached; retry in {seconds} s", retry_after=seconds)
        return caller

    @property
    def recheck_seconds(self) -> float:
        """How often a long-lived request re-checks its caller: as often as the key file may change."""
        return self.config.reload_seconds

    def still_valid(self, caller: Caller) -> bool:
        """Whether `caller`, resolved earlier from a key (by `caller`), still stands: its key, as the key file says
        now, is active and grants at least the rights it granted then (not revoked, removed or narrowed; widened
        is fine: `Caller.covers`; the file is readable). A trusted caller stands while checking is off. No rate
        limit, no "last used": a re-check is not a request."""
        if caller.key_id is None:
            return not self.checking
        current = self.keyring.current(caller.key_id)
        return current is not None and current.covers(caller)

    async def until_invalid(self, caller: Caller) -> None:
        """Return once `caller` no longer stands, re-checked every `recheck_seconds`: the key file is another
        process's to change, and the key ring notices a change only when asked (one `stat` at most that often), so
        there is no event to wait on."""
        while self.still_valid(caller):  # noqa: ASYNC110 - polls a file another process writes, at its reload rate
            await asyncio.sleep(self.recheck_seconds)
