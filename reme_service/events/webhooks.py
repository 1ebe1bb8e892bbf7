"""Webhook delivery: each configured endpoint gets the events it asked for as `POST` JSON, signed per Standard
Webhooks, retried with exponential backoff, every attempt logged. A slow or dead endpoint never slows the service:
deliveries wait in a bounded queue per endpoint (past it they are dropped, and the drop is logged).

Signature (https://www.standardwebhooks.com, what receivers' `standardwebhooks` libraries verify): `webhook-id` is
the event id (the same on every retry, for de-duplication), `webhook-timestamp` the attempt's Unix seconds and
`webhook-signature: v1,<base64 of HMAC-SHA256 of "<id>.<timestamp>.<body>">`. The HMAC key is the bytes a
`whsec_<base64>` secret encodes, or, for a secret without that prefix, its UTF-8 bytes (`signing_key`).

The headers of the first release (`X-ReMe-Signature: sha256=<hex>` of `<timestamp>.<body>` keyed with the secret
string, `X-ReMe-Timestamp`, `X-ReMe-Event`, `X-ReMe-Delivery`) are sent too, for this release only (docs/events.md).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
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
from reme_service.errors import ConfigError
from reme_service.events.event import Event

logger = logging.getLogger("reme_service.events")


SECRET_PREFIX = "whsec_"


def signing_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks signature: the bytes of a `whsec_<base64>` secret, else the secret's
    UTF-8 bytes (a receiver then verifies with those bytes: `standardwebhooks.Webhook(secret.encode())`). Raises
    ValueError for a `whsec_` secret that is not base64 or is empty."""
    if not secret.startswith(SECRET_PREFIX):
        return secret.encode()
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise ValueError("a whsec_ secret is whsec_ followed by base64") from None
    if not key:
        raise ValueError("a whsec_ secret needs a key after whsec_")
    return key


def standard_signature(key: bytes, message_id: str, timestamp: str, body: bytes) -> str:
    """The `webhook-signature` value: `v1,` and the base64 HMAC-SHA256 of `<id>.<timestamp>.<body>`."""
    digest = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The first release's `X-ReMe-Signature` (sent this release only): `sha256=<hex>` of `<timestamp>.<body>`."""
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
        try:
            self._key = signing_key(config.secret.get_secret_value())
        except ValueError as exc:
            raise ConfigError(f"events.webhooks secret of {config.url}: {exc}") from None
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
                "webhook-id": event.event_id,
                "webhook-timestamp": timestamp,
                "webhook-signature": standard_signature(self._key, event.event_id, timestamp, body),
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
