"""`EventBus`: publishes each change once to every subscriber (`subscribe`, for `GET /events`) and every webhook.

Subscribers read from a bounded queue of their own; one that falls behind loses the oldest events and is told so
(a `lagged` marker), so a slow reader cannot hold memory or slow a request. Events are published when a request's
changes are final: the audit recorder publishes the events of a request's trail (`AuditTrail.events`), the flow
jobs a job's end. The bus knows events only, nothing of trails or jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from reme_service.config.models import EventsConfig
from reme_service.events.event import Event
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
        #: where this node's events also go (the PostgreSQL state's fan-out to the other nodes: `state/pg/events.py`)
        self.relay: Callable[[Event], None] | None = None

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
        self.receive(event)
        if self.relay is not None:
            self.relay(event)
        for hook in self.webhooks:  # on the node that made the change only: each webhook hears of it once
            if hook.wants(event):
                hook.offer(event)

    def receive(self, event: Event) -> None:
        """Offer `event` to this node's subscribers (an event of this node, or one relayed from another)."""
        if not self.config.enabled:
            return
        for subscription in list(self._subscriptions):
            subscription.offer(event)
