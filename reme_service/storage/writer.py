"""`Writer`: who a store write is made for — the request's audit trail (its id and flow) and the caller's key id.

A request's store (`GuardedStore.bound`) carries its writer as a value: the ops, the management API and jobs get
a store bound to their request, and every write through it is recorded to that trail. A store bound to no writer
(start-up, scripts, a re-embedding's writes of vectors) records nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass

from reme_service.audit.trail import AuditTrail

#: set while a background job runs (`jobs/queue.py`): awaited by `GuardedStore` before each store write, bound or
#: not (a re-embedding's vector writes too); it raises to stop the job there (its key revoked, its workspace
#: erased) and records the job's first write (the step marker a restart reads)
write_gate: ContextVar[Callable[[], Awaitable[None]] | None] = ContextVar("write_gate", default=None)


async def pass_write_gate() -> None:
    """Let the running job's gate (if any) decide whether this write may go ahead; it raises when not."""
    gate = write_gate.get()
    if gate is not None:
        await gate()


@dataclass(frozen=True, slots=True)
class Writer:
    trail: AuditTrail
    #: the API key's id; None for a trusted caller (no keys, stdio MCP, the Python API)
    key_id: str | None = None

    @property
    def request_id(self) -> str:
        return self.trail.request_id

    @property
    def flow(self) -> str:
        return self.trail.flow
