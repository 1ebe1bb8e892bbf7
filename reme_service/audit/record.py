"""One line of the audit log: who changed what, in which workspace, through which flow, and how it ended."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reme_service.audit.trail import AuditTrail
from reme_service.auth.caller import Caller

#: a record lists at most this many ids per field (the counts stay exact); a 100,000-memory load is one line
MAX_IDS = 1000


class AuditRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    time: datetime
    request_id: str
    key_id: str | None = None
    key_name: str | None = None
    workspace_id: str
    flow: str
    action: str = Field(description="the vector_store action, else the flow name")
    status: Literal["ok", "error"]
    error_code: str | None = None
    ids_added: list[str] = Field(default_factory=list)
    ids_changed: list[str] = Field(default_factory=list)
    ids_deleted: list[str] = Field(default_factory=list)
    files_written: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    other_workspaces: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="counts of changes in workspaces other than workspace_id (copy, if any)"
    )
    truncated: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(
        cls,
        *,
        time: datetime,
        request_id: str,
        caller: Caller,
        workspace_id: str,
        flow: str,
        action: str,
        trail: AuditTrail,
        error_code: str | None,
    ) -> AuditRecord:
        def ids(bucket: dict[str, list[str]]) -> list[str]:
            return bucket.get(workspace_id, [])

        added, changed, deleted = ids(trail.added), ids(trail.changed), ids(trail.deleted)
        counts = {"added": len(added), "changed": len(changed), "deleted": len(deleted), "files": len(trail.files)}
        if workspace_id in trail.dropped_workspaces:
            counts["workspace_dropped"] = trail.dropped_workspaces[workspace_id]
        others: dict[str, dict[str, int]] = {}
        for name, bucket in (("added", trail.added), ("changed", trail.changed), ("deleted", trail.deleted)):
            for workspace, values in bucket.items():
                if workspace != workspace_id:
                    others.setdefault(workspace, {})[name] = len(values)
        longest = max(len(added), len(changed), len(deleted), len(trail.files))
        return cls(
            time=time,
            request_id=request_id,
            key_id=caller.key_id,
            key_name=caller.name,
            workspace_id=workspace_id,
            flow=flow,
            action=action,
            status="error" if error_code else "ok",
            error_code=error_code,
            ids_added=added[:MAX_IDS],
            ids_changed=changed[:MAX_IDS],
            ids_deleted=deleted[:MAX_IDS],
            files_written=trail.files[:MAX_IDS],
            counts=counts,
            other_workspaces=others,
            truncated=longest > MAX_IDS,
        )
