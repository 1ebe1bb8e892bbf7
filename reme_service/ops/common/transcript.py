"""Render messages as a compact step transcript for task-memory prompts (system messages are left out)."""

from __future__ import annotations

from collections.abc import Sequence

from reme_service.schema.messages import Message, Role


def _cut(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + "..."


def render_transcript(messages: Sequence[Message], *, limit: int | None = None) -> str:
    """One block per message: `### step.i role=... ` with tool calls listed under assistant steps."""
    blocks: list[str] = []
    for i, msg in enumerate(messages):
        if msg.role is Role.SYSTEM:
            continue
        if msg.role is Role.ASSISTANT:
            body = "\n\n".join(p for p in (msg.reasoning_content, _cut(msg.text, limit)) if p)
            lines = [f"### step.{i} role=assistant content={body}"]
            for call in msg.tool_calls:
                lines.append(f" - tool call={call.name}\n   params={_cut(call.arguments, limit)}")
            blocks.append("\n".join(lines))
        elif msg.role is Role.TOOL:
            blocks.append(f"### step.{i} role=tool tool call result={_cut(msg.text, limit)}")
        else:
            blocks.append(f"### step.{i} role=user content={_cut(msg.text, limit)}")
    return "\n".join(blocks)


def recent_lines(messages: Sequence[Message], *, count: int = 3, limit: int = 200) -> str:
    """The last `count` messages as `- role: content` lines, each content cut to `limit` characters."""
    tail = list(messages)[-count:]
    return "\n".join(f"- {m.role.value}: {_cut(m.text, limit)}" for m in tail)
