"""`RequestInfo`: what the request log line says beyond method, path and status — filled in as the request is
served (the flow and workspace are known only once the body is read), read when it ends."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(slots=True)
class RequestInfo:
    request_id: str
    flow: str = ""
    workspace: str = ""


#: the HTTP request being served, for its log line; `None` outside HTTP requests
current_request: ContextVar[RequestInfo | None] = ContextVar("current_request", default=None)
