"""Request-scoped facts that cross layers without being threaded through every signature.

`current_op` names the op running in the current task (`""` outside ops). The flow runner sets it around each
op; each `|` branch runs in its own task, so the value is exact under concurrency. The OpenAI-compatible LLM
client sends it as the `X-ReMe-Op` header, so a gateway or proxy in front of the provider can attribute calls
and tokens to the step that made them; test doubles choose their scripted replies by it.

`current_caller` is the identity (`auth.caller.Caller`) the request's API key grants, set by the HTTP and MCP
edges; the audit log records its key id and name. `current_trail` collects what the request changed
(`audit.trail.AuditTrail`), for the one audit record the app writes when the request ends. `current_request` is
the HTTP request's `observe.request_info.RequestInfo`, where the app notes the flow and workspace for the request
log line.
"""

from __future__ import annotations

from contextvars import ContextVar

from reme_service.audit.trail import AuditTrail
from reme_service.auth.caller import Caller
from reme_service.observe.request_info import RequestInfo

current_op: ContextVar[str] = ContextVar("current_op", default="")

#: the identity behind the current request; `None` means no request is being served (start-up, scripts)
current_caller: ContextVar[Caller | None] = ContextVar("current_caller", default=None)

#: what the current request changed, for its audit record; `None` when nothing is being audited
current_trail: ContextVar[AuditTrail | None] = ContextVar("current_trail", default=None)

#: the HTTP request being served, for its log line; `None` outside HTTP requests
current_request: ContextVar[RequestInfo | None] = ContextVar("current_request", default=None)
