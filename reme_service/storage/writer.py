"""`Writer`: who a store write is made for — the request's audit trail (its id and flow) and the caller's key id.

A request's store (`GuardedStore.bound`) carries its writer as a value: the ops, the management API and jobs get
a store bound to their request, and every write through it is recorded to that trail. A store bound to no writer
(start-up, scripts, a re-embedding's writes of vectors) records nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from reme_service.audit.trail import AuditTrail


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
