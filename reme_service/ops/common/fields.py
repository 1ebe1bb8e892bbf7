"""Request fields several op families read. Every flow's request model has the base fields (`workspace_id`,
`query`, `messages`, `metadata`); the others must be declared in the `input_schema` of each flow whose ops read
them, or the app refuses to start."""

from __future__ import annotations

from typing import Any

from reme_service.flow.context import Input
from reme_service.schema.messages import Message

QUERY: Input[str] = Input("query", str, default="")
MESSAGES: Input[list[Message]] = Input("messages", list[Message], factory=list)
METADATA: Input[dict[str, Any]] = Input("metadata", dict[str, Any], factory=dict)
TOP_K: Input[int | None] = Input("top_k", int)
# rank every memory instead of asking a big workspace's approximate index (docs/scaling.md)
EXACT: Input[bool] = Input("exact", bool, default=False)
