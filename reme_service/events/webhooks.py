"""Webhook delivery: each configured endpoint gets the events it asked for as `POST` JSON, signed with HMAC-SHA256,
retried with exponential backoff, every attempt logged. A slow or dead endpoint never slows the service: deliveries
wait in a bounded queue per endpoint (past it they are dropped, and the drop is logged).

Signature: `X-ReMe-Signature: sha256=<hex>` of `<X-ReMe-Timestamp>.<body>` with the endpoint's secret; receivers
recompute it and reject old timestamps (docs/events.md). `X-ReMe-Event` is the type, `X-ReMe-Delivery` the event id.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson

from reme_service.config.models import EventsConfig, WebhookConfig
from reme_service.events.event import Event

logger = logging.getLogger("reme_service.events")


def signature(secret: str, timestamp: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


class DeliveryLog:
    """One JSON line per delivery attempt in `<data_dir>/events/deliveries.jsonl`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, entry: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as handle:
            handle.write(orjson.dumps({"time": datetime.now(UTC).isoformat(), **entry}) + b"\n")


class Webhook:
    def __init__(self, config: WebhookConfig, events: EventsConfig, log: DeliveryLog) -> None:
        self.config = config
        self.settings = events
        self.log = log
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=events.queue_size)
        self._task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None

    def wants(self, event: Event) -> bool:
        spaces, types = self.config.workspaces, self.config.events
        return ("*" in spaces or event.workspace_id in spaces) and (not types or event.type in types)

    def offer(self, event: Event) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            logger.warning("webhook %s: queue full, event %s dropped", self.config.url, event.event_id)
            self.log.write({"event_id": event.event_id, "url": self.config.url, "outcome": "dropped"})

    def start(self) -> None:
        self._client = httpx.AsyncClient(timeout=self.settings.timeout)
        self._task = asyncio.create_task(self._deliver_all(), name=f"reme-webhook-{self.config.url}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    async def _deliver_all(self) -> None:
        while True:
            event = await self.queue.get()
            await self._deliver(event)

    async def _deliver(self, event: Event) -> None:
        assert self._client is not None
        body = event.model_dump_json().encode()
        secret = self.config.secret.get_secret_value()
        for attempt in range(1, self.settings.max_attempts + 1):
            timestamp = str(int(time.time()))
            headers = {
                "content-type": "application/json",
                "x-reme-event": event.type,
                "x-reme-delivery": event.event_id,
                "x-reme-timestamp": timestamp,
                "x-reme-signature": signature(secret, timestamp, body),
            }
            entry: dict[str, Any] = {"event_id": event.event_id, "url": self.config.url, "attempt": attempt}
            try:
                response = await self._client.post(self.config.url, content=body, headers=headers)
                entry["status"] = response.status_code
                delivered = 200 <= response.status_code < 300
            except httpx.HTTPError as exc:
                entry["error"] = f"{type(exc).__name__}: {exc}"[:300]
                delivered = False
            last = attempt == self.settings.max_attempts
            entry["outcome"] = "delivered" if delivered else "failed" if last else "retrying"
            await asyncio.to_thread(self.log.write, entry)
            if delivered:
                return
            if last:
                logger.warning(
                    "webhook %s: event %s failed after %d attempts", self.config.url, event.event_id, attempt
                )
                return
            await asyncio.sleep(self.settings.backoff_seconds * 2 ** (attempt - 1))
