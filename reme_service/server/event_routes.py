"""`GET /events[?workspace=W]`: change events as server-sent events (docs/events.md).

The stream opens with a `retry:` line once the subscription is in place (a client that waits for it misses
nothing after it), then one `id:` / `event:` / `data:` block per event; a comment line every
`HEARTBEAT_SECONDS` keeps proxies from closing an idle stream; `event: lagged` says how many events a reader too
slow to keep up lost. A key sees the events of the workspaces it covers; `workspace` outside them is a 403.

A stream lasts while its key does: it re-checks its caller (`Access.still_valid`) every `auth.reload_seconds` and
before every event it sends, and once the key is revoked, removed, changed or cannot be checked, it sends
`event: revoked` and ends, without the event that found it so.

A stream lasts as long as its reader, so streams do not count against `http.limit_concurrency` (they would take
the slots of the requests that do work): they have their own cap, `events.max_streams`, past which a new one is a
503 `overloaded` (checked before subscribing; streams opening at the same moment may pass it together); one key
holds at most `auth.per_key.events` of them (`server/guard.py`, a 429 past it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from reme_service.app import ReMeApp
from reme_service.auth.caller import caller_now
from reme_service.auth.policy import resolve_workspace, visible
from reme_service.errors import NotFoundError, OverloadedError
from reme_service.events.event import Event

HEARTBEAT_SECONDS = 15.0
REVOKED = (
    b'event: revoked\ndata: {"code": "unauthorized", "message": "this stream\'s API key was revoked or changed"}\n\n'
)


def _block(event: Event) -> bytes:
    return f"id: {event.event_id}\nevent: {event.type}\ndata: {event.model_dump_json()}\n\n".encode()


def event_router(app: ReMeApp) -> APIRouter:
    """`GET /events` of `app`."""
    router = APIRouter()

    @router.get(
        "/events",
        summary="Change events as server-sent events (ADD, UPDATE, DELETE, INVALIDATE, JOB)",
        responses={404: {"description": "change events are off: events.enabled is false (the error envelope)"}},
    )
    async def events(
        workspace: str | None = Query(
            None, description="only this workspace's events (default: every one the key covers)"
        ),
    ) -> StreamingResponse:
        if not app.events.active:
            raise NotFoundError("change events are off (events.enabled: false)")
        if app.events.streams >= app.config.events.max_streams:
            raise OverloadedError(
                f"{app.config.events.max_streams} event streams are open (events.max_streams); retry shortly"
            )
        caller = caller_now()
        accept: Callable[[Event], bool]
        if workspace is not None:
            only = resolve_workspace(caller, workspace, "read", "an event stream").workspace_id
            accept = lambda event: event.workspace_id == only  # noqa: E731
        else:
            accept = lambda event: visible(caller, event.workspace_id)  # noqa: E731

        async def stream() -> AsyncIterator[bytes]:
            loop = asyncio.get_running_loop()
            async with app.events.subscribe(accept) as subscription:
                yield b"retry: 3000\n\n"
                quiet_since = loop.time()
                while True:
                    wait = min(app.access.recheck_seconds, quiet_since + HEARTBEAT_SECONDS - loop.time())
                    try:
                        item: Event | int | None = await asyncio.wait_for(subscription.next(), max(wait, 0.0))
                    except TimeoutError:
                        item = None
                    if not app.access.still_valid(caller):
                        yield REVOKED
                        return
                    if item is None:
                        if loop.time() - quiet_since >= HEARTBEAT_SECONDS:
                            yield b": keep-alive\n\n"
                            quiet_since = loop.time()
                        continue
                    if isinstance(item, int):
                        yield f'event: lagged\ndata: {{"lost": {item}}}\n\n'.encode()
                    else:
                        yield _block(item)
                    quiet_since = loop.time()

        headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    return router
