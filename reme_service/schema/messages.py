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

    index: int = Field(default=0, description="position of the call in the assistant message")
    id: str = Field(default="", description="the call id that the tool message answers with tool_call_id")
    type: str = Field(default="function", description="always 'function'")
    name: str = Field(default="", description="the tool's name")
    arguments: str = Field(default="", description="the arguments as a JSON string (an object is accepted too)")

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

    role: Role = Field(default=Role.USER, description="system, user, assistant or tool")
    content: str | list[dict[str, Any]] | None = Field(
        default="", description="the text, or OpenAI content blocks ({type: text, text: ...})"
    )
    reasoning_content: str = Field(default="", description="a reasoning model's thinking, if any")
    tool_calls: list[ToolCall] = Field(default_factory=list, description="tool calls made by an assistant message")
    tool_call_id: str = Field(default="", description="for a tool message: the id of the call it answers")
    name: str | None = Field(default=None, description="optional name of the speaker or tool")
    time_created: str = Field(default="", description="when the message was written ('YYYY-MM-DD HH:MM:SS')")
    metadata: dict[str, Any] = Field(default_factory=dict, description="free-form message metadata")

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

    task_id: str = Field(default="", description="groups attempts at the same task (for comparisons)")
    messages: list[Message] = Field(default_factory=list, description="the run's messages, in order")
    score: float = Field(default=0.0, description="the run's outcome: 1.0 success, 0.0 failure, or in between")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="`query` (the original task) and optional `segments` of messages"
    )
