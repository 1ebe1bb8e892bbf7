"""`RequestObserver`: the outermost ASGI middleware. For every HTTP request it fixes the request id (the client's
`x-request-id` or a new one, written into the request's headers so every later reader agrees, and into every
answer's), times the request,
counts it in the metrics and writes its log line: 5xx at ERROR and 4xx at WARNING always, the rest at INFO when
`http.access_log` is on. The line carries the request id, method, path, status, duration and — once the app has
read the body — the flow and workspace (`observe.request_info.current_request`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reme_service.observe.metrics import Metrics
from reme_service.observe.request_info import RequestInfo, current_request
from reme_service.server.envelope import request_id_of

CLIENT_GONE = 499  # the status logged and counted for a request its client abandoned (nginx's convention)

logger = logging.getLogger("reme_service.access")


class RequestObserver:
    def __init__(self, app: ASGIApp, metrics: Metrics, flows: Collection[str], *, access_log: bool) -> None:
        self.app = app
        self.metrics = metrics
        self.flows = frozenset(flows)
        self.access_log = access_log

    def route_of(self, scope: Scope) -> str:
        """The series a request counts in: the flow's name, else the template of the route that served it
        (`/workspaces/{workspace_id}/memories`, `/jobs/{job_id}`), else `other` — so paths never make new series."""
        route = scope.get("route")
        template = getattr(route, "path", None)
        if isinstance(template, str) and template:
            name = template[1:]
            return name if name in self.flows else template
        path = str(scope.get("path", ""))
        if path.startswith("/messages/"):
            return "/messages/"
        return "other"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id, given = request_id_of(scope.get("headers", ()))
        if not given:
            scope["headers"] = [*scope.get("headers", ()), (b"x-request-id", request_id.encode("latin-1"))]
        info = RequestInfo(request_id)
        token = current_request.set(info)
        status = 500  # what the client sees when the app fails before answering (the server sends a 500)
        answered = gone = False
        started = time.perf_counter()

        async def observed_receive() -> Message:
            nonlocal gone
            message = await receive()
            gone = gone or message["type"] == "http.disconnect"
            return message

        async def observed_send(message: Message) -> None:
            nonlocal status, answered
            if message["type"] == "http.response.start":
                answered = True
                status = int(message["status"])
                headers = list(message.get("headers", ()))
                names = {name.lower() for name, _ in headers}
                added = [] if b"x-request-id" in names else [(b"x-request-id", request_id.encode("latin-1"))]
                if b"x-content-type-options" not in names:  # no browser reads a JSON answer as a page or script
                    added.append((b"x-content-type-options", b"nosniff"))
                if added:  # every answer names its id
                    message = {**message, "headers": [*headers, *added]}
            await send(message)

        try:
            await self.app(scope, observed_receive, observed_send)
            if gone and not answered:
                status = CLIENT_GONE  # it left before its request was read whole: nothing failed here
        finally:
            current_request.reset(token)
            seconds = time.perf_counter() - started
            method = str(scope.get("method", ""))
            path = str(scope.get("path", ""))
            self.metrics.request(self.route_of(scope), method, status, seconds)
            self._log(info, method, path, status, seconds)

    def _log(self, info: RequestInfo, method: str, path: str, status: int, seconds: float) -> None:
        level = logging.ERROR if status >= 500 else logging.WARNING if status >= 400 else logging.INFO
        if level == logging.INFO and not self.access_log:
            return
        duration_ms = round(seconds * 1000, 2)
        where = f" flow={info.flow} workspace={info.workspace}" if info.flow else ""
        logger.log(
            level,
            "%s %s %d %.1f ms request_id=%s%s",
            method,
            path,
            status,
            duration_ms,
            info.request_id,
            where,
            extra={
                "request_id": info.request_id,
                "method": method,
                "path": path,
                "status": status,
                "duration_ms": duration_ms,
                "flow": info.flow or None,
                "workspace": info.workspace or None,
            },
        )
