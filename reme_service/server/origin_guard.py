"""`OriginGuard`: the ASGI middleware that keeps web pages from driving the service through the user's browser.

A service on loopback without API keys (`auth.mode: auto`, the default) trusts whoever reaches its port. A browser
on the same machine reaches it too, on behalf of any page the user opens, in two ways:

- **cross-site requests**: a page may POST a `text/plain` body to `http://127.0.0.1:8002/vector_store` without a
  CORS preflight (a "simple" request), and `server/body.py` parses any content type as JSON, because curl and
  shell clients often omit it. The page cannot read the answer, but the write happens.
- **DNS rebinding**: a page on `evil.example` re-points that name at 127.0.0.1; its requests are then same-origin
  for the browser, so it can read the answers too (`/workspaces/{id}/export`). The browser still sends
  `Host: evil.example:8002`.

So, for every HTTP route (flows, management API, UI, events, docs, health):

- on a loopback bind (`http.host` is 127.0.0.0/8, ::1 or localhost), the Host header's name must be one that
  reaches this machine: a loopback address, `localhost`, `0.0.0.0` (every ReMe example's base URL), with any port,
  or an entry of `http.allowed_hosts` (`allowed_host`). Else 421 `misdirected_request`, as the MCP SDK answers.
  A service bound to a routable or wildcard address is reached by names this process cannot know, and API keys
  guard it: no Host check there (as MCP's `mcp._security`).
- a request whose `Origin` is neither the service's own (the Host header's, `same_origin`) nor listed in
  `http.cors_origins` is refused with 403 `cross_origin`, whatever its method: a browser sends `Origin` on
  cross-origin POST/PUT/PATCH/DELETE and on every `fetch`/`EventSource`, and would hide a GET's answer from the
  page anyway, so refusing it only spares the service the work (and its event-stream slots). A state-changing
  request without `Origin` but with `Sec-Fetch-Site: cross-site` or `same-site` is refused the same way.

Requests without `Origin` (curl, requests, httpx, ReMe 0.2 clients, Node on a server) pass unchanged; so do
top-level navigations (a link to `/ui` sends no `Origin`). Refusals are the failure envelope.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from reme_service.auth.access import is_loopback
from reme_service.errors import CrossOriginError, MisdirectedRequestError, ReMeError
from reme_service.server.envelope import declares_body, request_id_from, send_envelope

logger = logging.getLogger("reme_service.http")


#: names that reach a loopback service only from this machine; any port. `0.0.0.0` because every ReMe example
#: connects to `http://0.0.0.0:8002`, which reaches a local server, and no rebinding domain makes a browser send it.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "0.0.0.0")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def host_patterns(*extra: Iterable[str]) -> list[str]:
    """The Host headers a loopback service accepts, in the MCP SDK's pattern form (`name`, `name:port`,
    `name:*`): the loopback names with and without a port, then the configured extras (`http.allowed_hosts`,
    `mcp.allowed_hosts`), each `name:*` also as the bare `name` (the default port). The one list both the HTTP
    guard and MCP's transport security are given."""
    patterns = [form for name in LOOPBACK_NAMES for form in (name, f"{name}:*")]
    for entries in extra:
        for entry in entries:
            entry = entry.strip().lower()
            patterns.append(entry)
            if entry.endswith(":*"):
                patterns.append(entry[:-2])
    return list(dict.fromkeys(patterns))


def split_host(value: str) -> tuple[str, str | None]:
    """A Host header as (name, port or None): `[::1]:8002` → (`[::1]`, `8002`), `localhost` → (`localhost`, None)."""
    if value.startswith("["):
        name, _, rest = value.partition("]")
        return name + "]", rest[1:] if rest.startswith(":") else None
    name, colon, port = value.rpartition(":")
    return (name, port) if colon else (value, None)


def allowed_host(host: str, patterns: Iterable[str]) -> bool:
    """Whether the Host header `host` matches a pattern (`host_patterns`) or names a loopback address (127.0.0.0/8,
    ::1: an address literal is never a rebinding domain's). Case-insensitive."""
    host = host.strip().lower()
    name, port = split_host(host)
    if is_loopback(name):
        return True
    for pattern in patterns:
        if pattern == host or (pattern.endswith(":*") and port is not None and pattern[:-2] == name):
            return True
    return False


def same_origin(origin: str, host: str) -> bool:
    """Whether `origin` (`scheme://name[:port]`) is the service's own as the Host header names it. A Host without a
    port matches the origin scheme's default port (the service behind a TLS proxy that keeps the Host)."""
    try:
        parts = urlsplit(origin)
        origin_port = parts.port
    except ValueError:
        return False
    default = _DEFAULT_PORTS.get(parts.scheme)
    if default is None or not parts.hostname or parts.path or parts.query:
        return False
    name, port = split_host(host.strip().lower())
    if name.strip("[]") != parts.hostname:
        return False
    try:
        return (int(port) if port is not None else default) == (origin_port or default)
    except ValueError:
        return False


@dataclass(frozen=True)
class OriginPolicy:
    check_host: bool  # the service is on loopback: Host checked (DNS-rebinding protection)
    host_patterns: tuple[str, ...] = ()
    cors_origins: frozenset[str] = frozenset()  # `http.cors_origins`; "*" allows every origin

    @classmethod
    def of(cls, bind_host: str, allowed_hosts: Iterable[str], cors_origins: Iterable[str]) -> OriginPolicy:
        return cls(is_loopback(bind_host), tuple(host_patterns(allowed_hosts)), frozenset(cors_origins))

    def origin_allowed(self, origin: str, host: str) -> bool:
        return "*" in self.cors_origins or origin in self.cors_origins or same_origin(origin, host)


class OriginGuard:
    def __init__(self, app: ASGIApp, policy: OriginPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        error = self._check(scope)
        if error is None:
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", ())
        await send_envelope(send, error, request_id_from(headers), close=declares_body(headers))

    def _check(self, scope: Scope) -> ReMeError | None:
        host = origin = fetch_site = None
        for name, value in scope.get("headers", ()):
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
            elif name == b"sec-fetch-site":
                fetch_site = value.decode("latin-1").lower()
        # No Host at all (HTTP/1.0 by hand) is not a browser: browsers always send it.
        if self.policy.check_host and host is not None and not allowed_host(host, self.policy.host_patterns):
            logger.warning("refused Host %r on a loopback service (add it to http.allowed_hosts to allow it)", host)
            return MisdirectedRequestError(
                f"Host {host[:100]!r} does not name this service: on loopback it answers only to loopback names "
                "(DNS-rebinding protection); list the name in http.allowed_hosts to allow it"
            )
        if origin is not None:
            if self.policy.origin_allowed(origin, host or ""):
                return None
            logger.warning("refused a cross-origin request from %r (list it in http.cors_origins to allow it)", origin)
            return CrossOriginError(
                f"cross-origin request from {origin[:100]!r} refused; list the origin in http.cors_origins to allow it"
            )
        if scope.get("method") not in SAFE_METHODS and fetch_site in ("cross-site", "same-site"):
            return CrossOriginError(f"{fetch_site} request refused (Sec-Fetch-Site); send Origin from a listed origin")
        return None
