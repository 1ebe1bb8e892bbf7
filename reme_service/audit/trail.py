"""What one request changed, gathered while it runs: the request's store (`storage.guarded.GuardedStore`, bound to
a `storage.writer.Writer` holding this trail) and the working-memory writer add to the request's `AuditTrail`,
handed to them as a value; the app writes it as one record at the end. No op has to remember to report what it
changed: every write through the request's store is recorded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from reme_service.events.event import Event, EventType
from reme_service.history.entry import HistoryStep


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
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

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
