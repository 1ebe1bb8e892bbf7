"""What a request leaves behind once it ends: its change events (`events/`), its memories' history (`history/`)
and its audit record (`audit.log.AuditLog`), written together, on disk before the answer.

The rules of what is recorded live here, not in the app: a flow's request is recorded when it changed something
or was meant to (a write: `auth.policy.needed_scope`), also when it failed or was refused; a read leaves no
record. The record's action is the `vector_store` action, else the flow name; a `vector_store` copy also names its
source workspace (`extra.src_workspace_id`). The management routes record their changes as flow `manage`, each
with its own action (`change`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from reme_service.audit.record import AuditRecord
from reme_service.audit.trail import AuditTrail
from reme_service.auth.caller import Caller
from reme_service.auth.policy import needed_scope
from reme_service.config.models import FlowConfig
from reme_service.events.bus import EventBus
from reme_service.state.interfaces import AuditSink, HistoryStore, RecordsTogether

#: the flow whose `action` field names what a request does (`insert`, `copy`...): the record's action
ACTION_FLOW = "vector_store"


class AuditRecorder:
    """The audit side of one app: its flows' configuration (what writes), the event bus, the history and audit logs
    (None when off)."""

    def __init__(
        self,
        flows: Mapping[str, FlowConfig],
        *,
        default_workspace: str,
        events: EventBus,
        history: HistoryStore | None,
        log: AuditSink | None,
        together: RecordsTogether | None = None,
    ) -> None:
        """`together`: where the history and the audit log are one database, their writes of a request as one
        commit (else each is written on its own, at once)."""
        self._flows = flows
        self._default_workspace = default_workspace
        self._events = events
        self._history = history
        self._log = log
        self._together = together

    @property
    def tracking(self) -> bool:
        """Whether a flow's changes are wanted by anything (the audit log, change events, history)."""
        return self._log is not None or self._events.active or self._history is not None

    def new_trail(self, request_id: str, flow: str) -> AuditTrail:
        """The audit trail of one request (flows and the management routes): it keeps history when history is on."""
        return AuditTrail(request_id=request_id, flow=flow, keeps_history=self._history is not None)

    def _identity(self, flow: str, request: BaseModel) -> tuple[str, str, dict[str, Any]]:
        """The workspace (the request's own, the default for an empty one, as sent), the action and the extra fields
        of a flow request's record."""
        workspace = getattr(request, "workspace_id", "") or self._default_workspace
        action = getattr(request, "action", "") if flow == ACTION_FLOW else flow
        extra: dict[str, Any] = {}
        source = getattr(request, "src_workspace_id", "")
        if flow == ACTION_FLOW and action == "copy" and source:
            extra["src_workspace_id"] = source
        return workspace, str(action or flow), extra

    def expect_flow(self, trail: AuditTrail, flow: str, request: BaseModel, caller: Caller) -> None:
        """Let the flow request's writes commit drafts of its record (`expect`)."""
        workspace, action, extra = self._identity(flow, request)
        self.expect(trail, flow, action, workspace, caller, extra)

    def expect(
        self,
        trail: AuditTrail,
        flow: str,
        action: str,
        workspace_id: str,
        caller: Caller,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Give `trail` the draft of its request's record (as `change` will make it, had the request succeeded), for
        a store that commits it with each write (`storage/audit.py`; only with the audit log on)."""
        if self._log is None:
            return
        request_id = trail.request_id

        def draft(projected: AuditTrail) -> AuditRecord:
            return self._record(flow, action, workspace_id, request_id, projected, None, caller, extra)

        trail.draft = draft

    def _record(
        self,
        flow: str,
        action: str,
        workspace_id: str,
        request_id: str,
        trail: AuditTrail,
        error_code: str | None,
        caller: Caller,
        extra: dict[str, Any] | None,
    ) -> AuditRecord:
        record = AuditRecord.of(
            time=datetime.now(UTC),
            request_id=request_id,
            caller=caller,
            workspace_id=workspace_id,
            flow=flow,
            action=action,
            trail=trail,
            error_code=error_code,
        )
        record.extra.update(extra or {})
        return record

    async def flow_done(
        self, flow: str, request: BaseModel, request_id: str, trail: AuditTrail, error_code: str | None, caller: Caller
    ) -> None:
        """Record a flow's request once it ended (`error_code` None: it succeeded), as `caller`: when it changed
        something or was meant to. The workspace is the request's own (the default for an empty one), as sent:
        a request refused for its workspace id is recorded under that id."""
        config = self._flows.get(flow)
        writes = config is not None and needed_scope(config, request) == "write"
        if not (writes or trail.changed_anything):
            return
        workspace, action, extra = self._identity(flow, request)
        await self.change(flow, action, workspace, request_id, trail, error_code, caller, extra)

    async def change(
        self,
        flow: str,
        action: str,
        workspace_id: str,
        request_id: str,
        trail: AuditTrail,
        error_code: str | None,
        caller: Caller,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Publish the request's changes (`events/`), then append its memories' history and its audit record (when
        they are on; in one commit with `together`, else both at once, so their fsyncs overlap), as `caller`,
        durable when this returns. A record equal (but for its time) to the draft its last write committed is
        there already: it is not appended again."""
        for event in trail.events(flow, request_id):
            self._events.publish(event)
        history = trail.history if self._history is not None else {}
        record: AuditRecord | None = None
        if self._log is not None:
            record = self._record(flow, action, workspace_id, request_id, trail, error_code, caller, extra)
            if _same(trail.committed_draft, record):
                record = None
        if self._together is not None:
            if any(history.values()) or record is not None:
                await self._together.commit(history, record, trail.token)
            return
        writes: list[Awaitable[Any]] = []
        if self._history is not None:
            writes += [self._history.write(workspace, steps) for workspace, steps in history.items()]
        if self._log is not None and record is not None:
            writes.append(self._log.append(record, token=trail.token))
        if writes:
            await asyncio.gather(*writes)


def _same(draft: AuditRecord | None, record: AuditRecord) -> bool:
    return draft is not None and draft.model_dump(exclude={"time"}) == record.model_dump(exclude={"time"})
