"""What a caller may do: the scope a request needs and the workspaces it touches, checked before any op runs.

A flow declares `access: read` (retrievals, grep/read of working memory) or is a write (the default, so a flow
that forgets to say is closed to read keys); `read_when` makes a write flow a read for some requests
(`vector_store` with `action: list`). Fields declared `workspace: true` (copy's `src_workspace_id`) name
workspaces the key must cover too. The messages name neither the key nor any workspace: a caller learns only
that this request is not theirs to make.
"""

from __future__ import annotations

from pydantic import BaseModel

from reme_service.auth.caller import Caller, Scope
from reme_service.config.models import FlowConfig
from reme_service.errors import ForbiddenError


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


def authorize_workspace(caller: Caller, workspace_id: str, needed: Scope, what: str) -> None:
    """The management API's check (`server/manage.py`): `needed` scope for `what`, on one workspace."""
    check_scope(caller, needed, what)
    check_workspace(caller, workspace_id)
