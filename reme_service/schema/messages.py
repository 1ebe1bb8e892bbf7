"""Chat messages, tool calls and trajectories as clients send them (OpenAI-style, ReMe-compatible)."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class ToolCall(BaseModel):
    """A tool call; accepts the OpenAI shape `{id, type, function: {name, arguments}}` and ReMe's flat one."""

    model_config = ConfigDict(extra="ignore")

    index: int = 0
    id: str = ""
    type: str = "function"
    name: str = ""
    arguments: str = ""

    @model_validator(mode="before")
    @classmethod
    def _flatten_function(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("function"), dict):
            data = dict(data)
            fn = data.pop("function")
            data.setdefault("name", fn.get("name", ""))
            args = fn.get("arguments", "")
            data.setdefault("arguments", args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
        elif isinstance(data, dict) and not isinstance(data.get("arguments", ""), str):
            data = dict(data)
            data["arguments"] = json.dumps(data["arguments"], ensure_ascii=False)
        return data

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "function": {"name": self.name, "arguments": self.arguments}}


class Message(BaseModel):
    """One chat message. `content` may be a string or a list of content blocks."""

    model_config = ConfigDict(extra="ignore")

    role: Role = Role.USER
    content: str | list[dict[str, Any]] | None = ""
    reasoning_content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str = ""
    name: str | None = None
    time_created: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str:
        """The content as plain text (text blocks joined by newlines)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        parts = [str(block.get("text", "")) for block in self.content if block.get("type", "text") == "text"]
        return "\n".join(p for p in parts if p)

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role.value, "content": self.content or ""}
        if self.tool_calls:
            out["tool_calls"] = [tc.to_openai() for tc in self.tool_calls]
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        if self.name:
            out["name"] = self.name
        return out


class Trajectory(BaseModel):
    """A scored agent run: the messages of one attempt at a task."""

    model_config = ConfigDict(extra="ignore")

    task_id: str = ""
    messages: list[Message] = Field(default_factory=list)
    score: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)
