"""`HistoryEntry`: one change to one memory, and how the entries of a store write are worked out from the nodes.

A memory's fields, as history sees them, are the node's `content` (the memory's `when_to_use`), each top-level
key of its metadata (`content`, `score`, `time_modified`, `valid_to`, ...) and each key of its inner `metadata`
dict as `metadata.<key>`. An UPDATE holds `before` and `after` of the fields that changed, nothing else; an
ADD holds `after` (every field); a DELETE holds neither. An update that sets `valid_to` where it was empty is
an INVALIDATE: the fact stopped being true (time validity, docs/personal_memory.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from reme_service.schema.vector_node import VectorNode

HistoryEvent = Literal["ADD", "UPDATE", "DELETE", "INVALIDATE"]
#: the field whose first setting makes an update an INVALIDATE
VALID_TO = "valid_to"


class HistoryEntry(BaseModel):
    event: HistoryEvent = Field(description="ADD, UPDATE, DELETE or INVALIDATE (an update that set valid_to)")
    memory_id: str = Field(description="the memory's id")
    time: datetime = Field(default_factory=lambda: datetime.now(UTC), description="when it was written (UTC)")
    request_id: str = Field(default="", description="the request that made the change (its x-request-id)")
    key_id: str | None = Field(default=None, description="the API key's id; null for a trusted caller")
    flow: str = Field(default="", description="the flow, or `manage` for the management API")
    before: dict[str, Any] | None = Field(default=None, description="changed fields before (UPDATE, INVALIDATE)")
    after: dict[str, Any] | None = Field(default=None, description="changed fields after; every field for an ADD")


@dataclass(frozen=True)
class Scrub:
    """A point in a request's history where the entries so far of these memories (None: of all) lose their text."""

    ids: frozenset[str] | None


HistoryStep = HistoryEntry | Scrub


def node_fields(node: VectorNode) -> dict[str, Any]:
    """The node's fields, flat: `when_to_use`, the metadata's keys, the inner metadata's as `metadata.<key>`."""
    fields: dict[str, Any] = {"when_to_use": node.content}
    for key, value in node.metadata.items():
        if key == "metadata" and isinstance(value, Mapping):
            for inner, inner_value in value.items():
                fields[f"metadata.{inner}"] = inner_value
        elif key != "relevance":
            fields[key] = value
    return fields


def changes(before: VectorNode, after: VectorNode) -> tuple[dict[str, Any], dict[str, Any]]:
    """(before, after) of the fields that differ; a field absent on one side is null there."""
    old, new = node_fields(before), node_fields(after)
    was: dict[str, Any] = {}
    now: dict[str, Any] = {}
    for name in old.keys() | new.keys():
        if old.get(name) != new.get(name):
            was[name], now[name] = old.get(name), new.get(name)
    return was, now


def written(before: VectorNode | None, after: VectorNode, **common: Any) -> HistoryEntry | None:
    """The entry for one upserted node (`before`: the stored node it replaced, if any); None when nothing changed."""
    if before is None:
        return HistoryEntry(event="ADD", memory_id=after.unique_id, after=node_fields(after), **common)
    was, now = changes(before, after)
    if not now:
        return None
    event: HistoryEvent = "INVALIDATE" if now.get(VALID_TO) and not was.get(VALID_TO) else "UPDATE"
    return HistoryEntry(event=event, memory_id=after.unique_id, before=was, after=now, **common)
