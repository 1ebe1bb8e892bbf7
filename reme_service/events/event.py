"""`Event`: one change, as subscribers and webhooks receive it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

EventType = Literal["ADD", "UPDATE", "DELETE", "INVALIDATE", "JOB"]
EVENT_TYPES: tuple[EventType, ...] = ("ADD", "UPDATE", "DELETE", "INVALIDATE", "JOB")


class Event(BaseModel):
    event_id: str = Field(default_factory=lambda: f"evt_{uuid.uuid4().hex}")
    type: EventType
    workspace_id: str
    memory_ids: list[str] = Field(default_factory=list, description="the memories it concerns, in order")
    time: datetime = Field(default_factory=lambda: datetime.now(UTC))
    request_id: str = ""
    flow: str = ""
    job: dict[str, Any] | None = Field(default=None, description="JOB events: job_id, status, http_status")
