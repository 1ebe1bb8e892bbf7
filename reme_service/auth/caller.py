"""Who is calling: the identity an API key grants, carried through a request in `auth.caller.current_caller`.

`Caller` is what the rest of the service may know of a key: its id and name (never the key), its scope and the
workspaces it may touch. `TRUSTED` is the caller when checking is off or the transport is trusted (stdio MCP, the
Python API): every workspace, every action, no key.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Literal

from pydantic import BaseModel, ConfigDict

Scope = Literal["read", "write", "admin"]

ALL_WORKSPACES = "*"

_SCOPE_RANK: dict[Scope, int] = {"read": 0, "write": 1, "admin": 2}


class Caller(BaseModel):
    """The identity behind one request."""

    model_config = ConfigDict(frozen=True)

    key_id: str | None = None
    name: str | None = None
    scope: Scope = "admin"
    workspaces: tuple[str, ...] = (ALL_WORKSPACES,)

    def may_use(self, workspace_id: str) -> bool:
        return ALL_WORKSPACES in self.workspaces or workspace_id in self.workspaces

    def covers(self, earlier: Caller) -> bool:
        """Whether this identity (a key as it is now) grants everything `earlier` (the same key resolved before)
        was granted: the same key, a scope at least as high and every workspace it had. A widened key covers its
        earlier self; a narrowed one does not."""
        if self.key_id != earlier.key_id or _SCOPE_RANK[self.scope] < _SCOPE_RANK[earlier.scope]:
            return False
        return ALL_WORKSPACES in self.workspaces or set(earlier.workspaces) <= set(self.workspaces)


TRUSTED = Caller()


#: the identity behind the request being served, set by the HTTP and MCP edges (and by a job for its run); `None`
#: means no request is being served (start-up, scripts, the Python API): read it through `caller_now`
current_caller: ContextVar[Caller | None] = ContextVar("current_caller", default=None)


def caller_now() -> Caller:
    """The caller of the request being served, `TRUSTED` outside one. Read once where a request enters the service
    (a flow run, a route's `RequestScope`, an MCP session): what follows is handed the value."""
    return current_caller.get() or TRUSTED
