"""What one request changed, gathered while it runs: the request's store (`storage.guarded.GuardedStore`, bound to
a `storage.writer.Writer` holding this trail) and the working-memory writer add to the request's `AuditTrail`,
handed to them as a value; the app writes it as one record at the end. No op has to remember to report what it
changed: every write through the request's store is recorded.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reme_service.events.event import Event, EventType
from reme_service.history.entry import HistoryStep

if TYPE_CHECKING:
    from reme_service.audit.record import AuditRecord


@dataclass
class AuditTrail:
    """The changes of one request. Safe to add to from worker threads.

    With `keeps_history`, the stores also add each memory's history entries (`history/`) and, where memories were
    deleted, the point where their history so far loses its text (`Scrub`); the app writes them at the end."""

    request_id: str = ""
    flow: str = ""
    keeps_history: bool = False
    added: dict[str, list[str]] = field(default_factory=dict)  # workspace -> ids, in order, no repeats
    changed: dict[str, list[str]] = field(default_factory=dict)
    deleted: dict[str, list[str]] = field(default_factory=dict)
    dropped_workspaces: dict[str, int] = field(default_factory=dict)  # workspace -> memories it held
    files: list[str] = field(default_factory=list)  # working-memory paths written, relative to their root
    invalidated: dict[str, list[str]] = field(default_factory=dict)  # ids also in `changed`: valid_to newly set
    history: dict[str, list[HistoryStep]] = field(default_factory=dict)  # workspace -> entries and scrubs, in order
    #: names the request's audit rows in PostgreSQL: its drafts and its final record (`state/pg/records.py`)
    token: str = field(default_factory=lambda: secrets.token_hex(12))
    #: the request's audit record were it to end now, successfully (`AuditRecorder.expect`): what a write whose
    #: transaction takes the audit row commits with the memories (`storage/audit.py`); None: no drafts
    draft: Callable[[AuditTrail], AuditRecord] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _drafted: Any = field(default=None, repr=False)  # the last draft committed
    _drafting: int = field(default=0, repr=False)  # joined writes under way
    _overlapped: bool = field(default=False, repr=False)  # two were under way at once: no draft is known final

    @property
    def changed_anything(self) -> bool:
        return bool(self.added or self.changed or self.deleted or self.dropped_workspaces or self.files)

    def _add(self, bucket: dict[str, list[str]], workspace_id: str, ids: list[str]) -> None:
        with self._lock:
            present = bucket.setdefault(workspace_id, [])
            seen = set(present)
            for memory_id in ids:
                if memory_id not in seen:
                    seen.add(memory_id)
                    present.append(memory_id)

    def projected(self, apply: Callable[[AuditTrail], None]) -> AuditTrail:
        """A copy of the changes so far with `apply` applied: what this trail will hold once a write succeeds."""
        with self._lock:
            copy = AuditTrail(
                request_id=self.request_id,
                flow=self.flow,
                keeps_history=self.keeps_history,
                added={k: list(v) for k, v in self.added.items()},
                changed={k: list(v) for k, v in self.changed.items()},
                deleted={k: list(v) for k, v in self.deleted.items()},
                dropped_workspaces=dict(self.dropped_workspaces),
                files=list(self.files),
                token=self.token,
            )
        apply(copy)
        return copy

    def draft_begins(self) -> None:
        with self._lock:
            self._drafting += 1
            self._overlapped = self._overlapped or self._drafting > 1

    def draft_ends(self, committed: AuditRecord | None) -> None:
        """A joined write ended; `committed` is the draft its transaction committed (None: none)."""
        with self._lock:
            self._drafting -= 1
            if committed is not None:
                self._drafted = committed

    @property
    def committed_draft(self) -> AuditRecord | None:
        """The last draft committed, when it is known to be the request's last row (no two drafting writes ran at
        once: then the order of their rows is not known here)."""
        with self._lock:
            return None if self._overlapped else self._drafted

    def wrote(self, workspace_id: str, *, added: list[str], changed: list[str]) -> None:
        if added:
            self._add(self.added, workspace_id, added)
        if changed:
            self._add(self.changed, workspace_id, changed)

    def deleted_ids(self, workspace_id: str, ids: list[str]) -> None:
        if ids:
            self._add(self.deleted, workspace_id, ids)

    def dropped_workspace(self, workspace_id: str, count: int) -> None:
        with self._lock:
            self.dropped_workspaces[workspace_id] = self.dropped_workspaces.get(workspace_id, 0) + count

    def wrote_files(self, paths: list[str]) -> None:
        with self._lock:
            self.files.extend(paths)

    def recorded(self, workspace_id: str, steps: list[HistoryStep]) -> None:
        """History steps of a store write for the recorder to write at the end: entries, and the points where the
        memories deleted so far lose their text (`Scrub`). A store whose transaction took them (the history in the
        pgvector store's database: `storage/audit.py`) committed them with the write, and adds none here."""
        if steps:
            with self._lock:
                self.history.setdefault(workspace_id, []).extend(steps)

    def invalidated_ids(self, workspace_id: str, ids: list[str]) -> None:
        if ids:
            self._add(self.invalidated, workspace_id, ids)

    def events(self, flow: str, request_id: str) -> list[Event]:
        """The change events of what the request did: one per workspace and kind of change, ADD, UPDATE,
        INVALIDATE (an update that marked facts no longer true), DELETE (a dropped workspace is a DELETE with no
        ids)."""
        updated = {}
        for workspace, ids in self.changed.items():
            invalidated = set(self.invalidated.get(workspace, ()))
            updated[workspace] = [i for i in ids if i not in invalidated]
        kinds: tuple[tuple[EventType, dict[str, list[str]]], ...] = (
            ("ADD", self.added),
            ("UPDATE", updated),
            ("INVALIDATE", self.invalidated),
            ("DELETE", self.deleted),
        )
        events = [
            Event(type=kind, workspace_id=workspace_id, memory_ids=list(ids), request_id=request_id, flow=flow)
            for kind, by_workspace in kinds
            for workspace_id, ids in by_workspace.items()
            if ids
        ]
        events += [
            Event(type="DELETE", workspace_id=workspace_id, request_id=request_id, flow=flow)
            for workspace_id in self.dropped_workspaces
            if workspace_id not in self.deleted
        ]
        return events
