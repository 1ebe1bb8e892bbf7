"""`AuthGate`: the ASGI middleware that turns a request's API key into the `Caller` the flows run as.

It sits in front of the HTTP routes and of MCP's SSE and streamable-HTTP apps (stdio is local and trusted). Each
request's key (`auth.credentials.presented_key`) goes to `Access.admit`; the caller is set in
`auth.caller.current_caller` for the rest of the request (read once, `auth.caller.caller_now`, into the request's
`auth.policy.RequestScope`, which checks the workspace and the scope against it), or the request is answered at
once: 401 with `WWW-Authenticate: Bearer`, 429 with
`Retry-After`, in the error envelope, with `connection: close` when the request announced a body: nothing of it is
read before its key is known. Health, the OpenAPI document and its pages stay open: they say nothing
private; so do the memory browser's static files (`/ui`: no data, the page asks for the key).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from reme_service.auth.access import Access
from reme_service.auth.caller import current_caller
from reme_service.auth.credentials import presented_key
from reme_service.errors import RateLimitedError, ReMeError, UnauthorizedError
from reme_service.server.envelope import declares_body, request_id_from, send_envelope
from reme_service.server.ui import UI_PATHS

OPEN_PATHS = frozenset(
    {"/health", "/health/live", "/health/ready", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json", *UI_PATHS}
)
OPEN_PREFIXES = ("/docs/static/",)  # the docs pages' scripts and styles


def is_open_path(path: str) -> bool:
    """Whether `path` is served without a key (health, docs, the UI's static files)."""
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


class AuthGate:
    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or is_open_path(path) or scope.get("method") == "OPTIONS":
            await self.app(scope, receive, send)
            return
        try:
            caller = await self.access.admit(presented_key(scope.get("headers", ())))
        except ReMeError as error:
            await self._refuse(scope, send, error)
            return
        token = current_caller.set(caller)
        try:
            await self.app(scope, receive, send)
        finally:
            current_caller.reset(token)

    @staticmethod
    async def _refuse(scope: Scope, send: Send, error: ReMeError) -> None:
        """Answer with `error` in the failure envelope (401 with `WWW-Authenticate`, 429 with `Retry-After`)."""
        retry_after = error.retry_after if isinstance(error, RateLimitedError) else None
        challenge = [(b"www-authenticate", b'Bearer realm="reme"')] if isinstance(error, UnauthorizedError) else None
        headers = scope.get("headers", ())
        request_id = request_id_from(headers)
        close = declares_body(headers)  # the body is not read: the connection ends with the answer
        await send_envelope(send, error, request_id, retry_after=retry_after, extra=challenge, close=close)
