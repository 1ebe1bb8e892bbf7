"""`PgEventRelay`: change events fan out to every node through PostgreSQL's LISTEN/NOTIFY.

Each node publishes its events locally as before (`events.bus.EventBus`: its `/events` streams and its webhooks)
and also NOTIFYs them on `<prefix>events`, tagged with its node id; every node LISTENs and offers the events of
the others to its own `/events` streams only (`EventBus.receive`), so `/events` on any node sees every write and a
webhook is called once, by the node that made the change. One thread per node sends and listens (psycopg's
connections are not shared between threads); it reconnects by itself when PostgreSQL comes back (events made
meanwhile reach that node's own streams, not the others': events are a live feed, not a log — history is the log).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import uuid

import orjson
import psycopg

from reme_service.errors import ReMeError
from reme_service.events.bus import EventBus
from reme_service.events.event import Event
from reme_service.state.pg.db import StateDb

logger = logging.getLogger("reme_service.events")
CHANNEL = "events"
MAX_PAYLOAD = 7000  # NOTIFY payloads stop at 8000 bytes: a larger event goes in pieces of its memory ids
POLL_SECONDS = 0.05


class PgEventRelay:
    def __init__(self, db: StateDb, bus: EventBus) -> None:
        self.db = db
        self.bus = bus
        self.node = uuid.uuid4().hex[:12]
        self._outgoing: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.listening = threading.Event()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.bus.relay = self._outgoing.put
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="reme-state-events", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self.bus.relay = None
        self._stop.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 10)
            self._thread = None

    def _payloads(self, event: Event) -> list[str]:
        data = event.model_dump(mode="json")
        whole = orjson.dumps({"node": self.node, "event": data}).decode()
        if len(whole.encode()) <= MAX_PAYLOAD or not event.memory_ids:
            return [whole]
        pieces, ids, size = [], list(event.memory_ids), max(1, len(event.memory_ids) // 2)
        while ids:
            part, ids = ids[:size], ids[size:]
            piece = orjson.dumps({"node": self.node, "event": {**data, "memory_ids": part}}).decode()
            if len(piece.encode()) > MAX_PAYLOAD and size > 1:
                ids, size = part + ids, max(1, size // 2)
                continue
            pieces.append(piece)
        return pieces

    def _send(self) -> None:
        batch: list[str] = []
        while True:
            try:
                batch += self._payloads(self._outgoing.get_nowait())
            except queue.Empty:
                break
        if batch:
            channel = self.db.channel(CHANNEL)
            self.db.run(
                lambda conn: conn.cursor().executemany("SELECT pg_notify(%s, %s)", [(channel, p) for p in batch])
            )

    def _deliver(self, payload: str) -> None:
        try:
            message = orjson.loads(payload)
            if message.get("node") == self.node:
                return
            event = Event.model_validate(message["event"])
        except (ValueError, KeyError, TypeError):
            logger.warning("events: an unreadable notification was ignored")
            return
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.bus.receive, event)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self.db.connect() as conn:
                    conn.execute(f"LISTEN {self.db.channel(CHANNEL)}")
                    self.listening.set()
                    while not self._stop.is_set():
                        self._send()
                        for note in conn.notifies(timeout=POLL_SECONDS):
                            self._deliver(note.payload)
            except (ReMeError, psycopg.Error) as exc:
                self.listening.clear()
                logger.warning("events: the relay to other nodes is down (%s); retrying", exc)
                self._stop.wait(1.0)
