"""Who may call the service: the auth mode, the key ring and the rate limit, turned into a `Caller` per request.

`Access.caller(credentials)` is what the HTTP and MCP edges ask, with the key a request presented (or None):

- checking off (`auth.mode: off`, or `auto` on loopback while no key exists): the trusted caller, whatever was
  presented;
- checking on: no key → 401; a malformed, unknown or revoked key → 401; a known key → its `Caller`, after its rate
  limit (429 with the seconds to wait).

Keys are required in `auto` mode as soon as the service listens on anything but loopback, and a service that
requires keys refuses to start while the key file has none (there would be nobody it could serve).
"""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path

from reme_service.auth.caller import TRUSTED, Caller
from reme_service.auth.keyring import KeyRing
from reme_service.auth.rate_limit import RateLimiter
from reme_service.config.models import AuthConfig
from reme_service.errors import ConfigError, RateLimitedError, UnauthorizedError

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


class Access:
    def __init__(self, config: AuthConfig, keyring: KeyRing, *, host: str | None) -> None:
        self.config = config
        self.keyring = keyring
        self.host = host
        self.exposed = host is not None and not is_loopback(host)
        limit = config.rate_limit
        self.limiter = RateLimiter(limit.requests_per_second, limit.burst) if limit.requests_per_second else None

    @classmethod
    def open(cls, config: AuthConfig, data_dir: Path, *, host: str | None) -> Access:
        """Read the key file and check the service may start as configured; ConfigError says why not."""
        keyring = KeyRing(keys_path(config, data_dir), reload_seconds=config.reload_seconds)
        keyring.load()
        access = cls(config, keyring, host=host)
        if config.mode == "off":
            if access.exposed:
                logger.warning(
                    "auth.mode=off on %s: anyone who reaches the port can read and change every workspace", host
                )
        elif host is not None and (config.mode == "required" or access.exposed) and not keyring.has_active_keys():
            where = "auth.mode=required" if config.mode == "required" else f"the service listens on {host}"
            raise ConfigError(
                f"auth: {where}, so API keys are required, and {keyring.path} holds none. Create one with "
                "`reme keys create --workspace NAME --scope write` (same config arguments as `reme`), "
                "or set auth.mode=off to serve without keys"
            )
        return access

    @property
    def checking(self) -> bool:
        if self.config.mode == "off":
            return False
        return self.config.mode == "required" or self.exposed or self.keyring.has_keys()

    def caller(self, key: str | None) -> Caller:
        if not self.checking:
            return TRUSTED
        if key is None:
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
