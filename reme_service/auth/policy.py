"""What a caller may do: the scope a request needs and the workspaces it touches, checked before any op runs.

A flow declares `access: read` (retrievals, grep/read of working memory) or is a write (the default, so a flow
that forgets to say is closed to read keys); `read_when` makes a write flow a read for some requests
(`vector_store` with `action: list`). Fields declared `workspace: true` (copy's `src_workspace_id`) name
workspaces the key must cover too. The messages name neither the key nor any workspace: a caller learns only
that this request is not theirs to make.

Every authorisation decision of the service is made here. A request's caller, workspace and needed scope are
resolved once, where the request enters (`resolve_flow` for a flow's request, `resolve_workspace` for a route on
one workspace), into a `RequestScope` that the rest of the request is handed: the flow context, the management
routes, jobs and audit read it rather than resolving again. `visible` filters what a caller may see of listings
(workspaces, jobs, events).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from reme_service.auth.caller import Caller, Scope
from reme_service.config.models import FlowConfig
from reme_service.errors import ForbiddenError
from reme_service.schema.workspace_ids import WorkspaceId, validate_workspace_id


class RequestScope(BaseModel):
    """Who makes one request, on which workspace, needing what; resolved and checked once per request."""

    model_config = ConfigDict(frozen=True)

    caller: Caller
    #: validated (a `WorkspaceId`); a flow request's empty `workspace_id` is already the configured `default_workspace`
    workspace_id: WorkspaceId
    #: what the request needs of the caller's key: `read`, or `write` for anything that may change memories
    needed: Scope


def resolve_flow(
    caller: Caller, flow_name: str, flow: FlowConfig | None, request: BaseModel, default_workspace: str
) -> RequestScope:
    """The scope of a flow's request: its workspace (empty: `default_workspace`) validated (400), then the caller's
    right to make it checked (403). A flow without configuration (not served by the app) is not checked."""
    workspace_id = validate_workspace_id(getattr(request, "workspace_id", "") or default_workspace)
    needed = needed_scope(flow, request) if flow is not None else "write"
    if flow is not None:
        authorize(caller, flow_name, flow, request, workspace_id)
    return RequestScope(caller=caller, workspace_id=workspace_id, needed=needed)


def resolve_workspace(caller: Caller, workspace_id: str, needed: Scope, what: str) -> RequestScope:
    """The scope of a request on one named workspace (the management routes, an event stream's filter): the id
    validated (400), then `needed` checked for `what` and the workspace against the key (403)."""
    return workspace_scope(caller, validate_workspace_id(workspace_id), needed, what)


def workspace_scope(caller: Caller, workspace_id: WorkspaceId, needed: Scope, what: str) -> RequestScope:
    """`resolve_workspace` for an id validated already: `needed` checked for `what` and the workspace against the
    key (403)."""
    check_scope(caller, needed, what)
    check_workspace(caller, workspace_id)
    return RequestScope(caller=caller, workspace_id=workspace_id, needed=needed)


def visible(caller: Caller, workspace_id: str) -> bool:
    """Whether `caller` may see `workspace_id` and what belongs to it (a listing's entry, a job, an event): what it
    may not see, it is not told exists."""
    return caller.may_use(workspace_id)


def needed_scope(flow: FlowConfig, request: BaseModel) -> Scope:
    if flow.access == "read":
        return "read"
    for field, values in flow.read_when.items():
        if getattr(request, field, None) in values:
            return "read"
    return "write"


def touched_workspaces(flow: FlowConfig, request: BaseModel, workspace_id: str) -> list[str]:
    """The request's workspace and every other one it names (fields declared `workspace: true`)."""
    touched = [workspace_id]
    for name, spec in flow.input_schema.items():
        value = getattr(request, name, None) if spec.workspace else None
        if isinstance(value, str) and value:
            touched.append(value)
    return touched


def authorize(caller: Caller, flow_name: str, flow: FlowConfig, request: BaseModel, workspace_id: str) -> None:
    """ForbiddenError (403) unless `caller` may make this request."""
    check_scope(caller, needed_scope(flow, request), f"{flow_name} with these arguments")
    for workspace in touched_workspaces(flow, request, workspace_id):
        check_workspace(caller, workspace)


def check_scope(caller: Caller, needed: Scope, what: str) -> None:
    """ForbiddenError (403) when `caller` is read-only and `what` (a flow's request, a management call) writes."""
    if caller.scope == "read" and needed != "read":
        raise ForbiddenError(f"this API key is read-only, and {what} changes memories")


def check_workspace(caller: Caller, workspace_id: str) -> None:
    """ForbiddenError (403) unless `caller`'s key covers `workspace_id` (the message names neither)."""
    if not caller.may_use(workspace_id):
        raise ForbiddenError("this API key may not use the requested workspace")
