"""`EventBus`: publishes each change once to every subscriber (`subscribe`, for `GET /events`) and every webhook.

Subscribers read from a bounded queue of their own; one that falls behind loses the oldest events and is told so
(a `lagged` marker), so a slow reader cannot hold memory or slow a request. Events are published when a request's
changes are final (`audit/recorder.py: AuditRecorder.change` calls `publish_trail` with the request's audit trail;
`jobs/flow_jobs.py: FlowJobs` `publish`es a `JOB` event as each job finishes).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from reme_service.audit.trail import AuditTrail
from reme_service.config.models import EventsConfig
from reme_service.events.event import Event, EventType
from reme_service.events.webhooks import DeliveryLog, Webhook

Lagged = int  # how many events a subscriber lost


class Subscription:
    def __init__(self, accept: Callable[[Event], bool], size: int) -> None:
        self.accept = accept
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=size)
        self.lost = 0

    def offer(self, event: Event) -> None:
        if not self.accept(event):
            return
        if self.queue.full():
            self.queue.get_nowait()  # the oldest goes
            self.lost += 1
        self.queue.put_nowait(event)

    async def next(self) -> Event | Lagged:
        """The next event, or the count of events lost since the last call (when some were)."""
        if self.lost:
            lost, self.lost = self.lost, 0
            return lost
        return await self.queue.get()


class EventBus:
    def __init__(self, config: EventsConfig, folder: Path) -> None:
        self.config = config
        log = DeliveryLog(folder / "deliveries.jsonl")
        self.webhooks = [Webhook(hook, config, log) for hook in config.webhooks]
        self._subscriptions: set[Subscription] = set()

    @property
    def active(self) -> bool:
        return self.config.enabled

    @property
    def streams(self) -> int:
        """Subscriptions open now (each a `GET /events` stream)."""
        return len(self._subscriptions)

    def start(self) -> None:
        for hook in self.webhooks:
            hook.start()

    async def stop(self) -> None:
        for hook in self.webhooks:
            await hook.stop()

    @contextlib.asynccontextmanager
    async def subscribe(self, accept: Callable[[Event], bool]) -> AsyncIterator[Subscription]:
        subscription = Subscription(accept, self.config.subscriber_queue)
        self._subscriptions.add(subscription)
        try:
            yield subscription
        finally:
            self._subscriptions.discard(subscription)

    def publish(self, event: Event) -> None:
        if not self.config.enabled:
            return
        for subscription in list(self._subscriptions):
            subscription.offer(event)
        for hook in self.webhooks:
            if hook.wants(event):
                hook.offer(event)

    def publish_trail(self, flow: str, request_id: str, trail: AuditTrail) -> None:
        """One event per workspace and kind of change the request made: ADD, UPDATE, INVALIDATE (an update that
        marked facts no longer true), DELETE (a dropped workspace is a DELETE with no ids)."""
        updated = {}
        for workspace, ids in trail.changed.items():
            invalidated = set(trail.invalidated.get(workspace, ()))
            updated[workspace] = [i for i in ids if i not in invalidated]
        kinds: tuple[tuple[EventType, dict[str, list[str]]], ...] = (
            ("ADD", trail.added),
            ("UPDATE", updated),
            ("INVALIDATE", trail.invalidated),
            ("DELETE", trail.deleted),
        )
        for kind, by_workspace in kinds:
            for workspace_id, ids in by_workspace.items():
                if not ids:
                    continue
                self.publish(
                    Event(type=kind, workspace_id=workspace_id, memory_ids=list(ids), request_id=request_id, flow=flow)
                )
        for workspace_id in trail.dropped_workspaces:
            if workspace_id not in trail.deleted:
                self.publish(Event(type="DELETE", workspace_id=workspace_id, request_id=request_id, flow=flow))
