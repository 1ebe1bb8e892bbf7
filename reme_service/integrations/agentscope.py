"""AgentScope 1.x long-term memory backed by this service over HTTP (the `agentscope` extra:
`pip install -e ".[agentscope]"`).

```python
from agentscope.agent import ReActAgent
from reme_service.integrations.agentscope import ReMeLongTermMemory

memory = ReMeLongTermMemory("http://127.0.0.1:8002", user_name="alice")          # personal memory of alice
agent = ReActAgent(name="Friday", sys_prompt="...", model=..., formatter=...,
                   long_term_memory=memory, long_term_memory_mode="both")
...
await memory.close()
```

It implements `agentscope.memory.LongTermMemoryBase` in both of its modes:

- static control (the agent calls these around each reply): `record(msgs)` sends the messages not recorded yet to
  `summary_personal_memory` (or `summary_task_memory`), `retrieve(msg)` returns the `answer` of
  `retrieve_personal_memory` (or `retrieve_task_memory`) for the message's text, which AgentScope puts in the prompt;
- agent control (tools the model may call): `record_to_memory(thinking, content)` stores each content item as it
  is (an observation of the user, or a task experience: the model already chose it, so it skips the summary flow's
  filter), `retrieve_from_memory(keywords, limit)` searches once per keyword and returns the distinct memories.

`kind="personal"` (default) keeps facts about one user (`user_name`) in the workspace `workspace_id` (default: the
user name). `kind="task"` keeps experiences: recorded conversations become task memories scored `task_score`.
Failures of the static methods raise the service's errors (`reme_service.errors`); the tool functions return them
to the model as the tool's text, as AgentScope expects.
Works with agentscope 1.0.x (2.x removed `agentscope.memory`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

from agentscope.memory import LongTermMemoryBase
from agentscope.message import Msg, TextBlock
from agentscope.tool import ToolResponse

from reme_service.client import DEFAULT_BASE_URL, AsyncReMeClient, FlowResult
from reme_service.errors import ReMeError

logger = logging.getLogger("reme_service.integrations.agentscope")

# ReActAgent adds what `retrieve` returned as a message of this name; it must not be recorded back as a new fact.
RETRIEVED_MSG_NAME = "long_term_memory"


def msg_text(msg: Msg) -> str:
    """The text of a message, with tool calls and tool results written out as text lines."""
    if isinstance(msg.content, str):
        return msg.content.strip()
    lines: list[str] = []
    for block in msg.content:
        kind = block.get("type")
        if kind == "text":
            lines.append(str(block.get("text", "")))
        elif kind == "tool_use":
            lines.append(f"[called {block.get('name')} with {block.get('input')}]")
        elif kind == "tool_result":
            output = block.get("output")
            if isinstance(output, list):
                output = " ".join(str(part.get("text", "")) for part in output if part.get("type") == "text")
            lines.append(f"[{block.get('name')} returned: {output}]")
    return "\n".join(line for line in lines if line.strip()).strip()


def to_messages(msgs: Sequence[Msg]) -> list[dict[str, Any]]:
    """Service messages from AgentScope ones: user and assistant turns with text, in order (tool traffic is folded
    into the assistant's text; AgentScope's system-role tool results become assistant text too)."""
    out: list[dict[str, Any]] = []
    for msg in msgs:
        text = msg_text(msg)
        if not text or msg.name == RETRIEVED_MSG_NAME:
            continue
        role = "user" if msg.role == "user" else "assistant"
        message: dict[str, Any] = {"role": role, "content": text}
        if msg.timestamp:
            message["time_created"] = msg.timestamp[:19]
        out.append(message)
    return out


def _query_of(msg: Msg | Sequence[Msg] | None) -> str:
    if msg is None:
        return ""
    msgs = [msg] if isinstance(msg, Msg) else [m for m in msg if m is not None]
    texts = [msg_text(m) for m in msgs if m.name != RETRIEVED_MSG_NAME]
    return "\n".join(t for t in texts if t)


def _text(text: str, **metadata: Any) -> ToolResponse:
    return ToolResponse(content=[TextBlock(type="text", text=text)], metadata=metadata or None)


class ReMeLongTermMemory(LongTermMemoryBase):
    """AgentScope long-term memory stored in a ReMe-compatible service."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        user_name: str = "user",
        workspace_id: str | None = None,
        kind: Literal["personal", "task"] = "personal",
        task_score: float = 1.0,
        timeout: float = 120.0,
        client: AsyncReMeClient | None = None,
        api_key: str | None = None,
    ) -> None:
        """`api_key` (default: `REME_API_KEY`) is the key of a service that requires one; it must cover the
        workspace (`workspace_id`, else `user_name`)."""
        super().__init__()
        if kind not in ("personal", "task"):
            raise ValueError(f"kind must be 'personal' or 'task', not {kind!r}")
        self.user_name = user_name
        self.workspace_id = workspace_id or user_name
        self.kind = kind
        self.task_score = task_score
        self._owns_client = client is None
        self.client = client or AsyncReMeClient(
            base_url, workspace_id=self.workspace_id, timeout=timeout, api_key=api_key
        )
        self._recorded_ids: set[str] = set()

    async def close(self) -> None:
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> ReMeLongTermMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the service calls --------------------------------------------------------------------------

    async def _summarise(self, messages: list[dict[str, Any]]) -> FlowResult:
        if self.kind == "personal":
            return await self.client.summary_personal_memory(
                [{"messages": messages}], user_name=self.user_name, workspace_id=self.workspace_id
            )
        query = next((m["content"] for m in messages if m["role"] == "user"), messages[0]["content"])
        trajectory = {"messages": messages, "score": self.task_score, "metadata": {"query": query}}
        return await self.client.summary_task_memory([trajectory], workspace_id=self.workspace_id)

    async def _search(self, query: str, limit: int) -> FlowResult:
        if self.kind == "personal":
            return await self.client.retrieve_personal_memory(
                query, top_k=limit, user_name=self.user_name, workspace_id=self.workspace_id
            )
        return await self.client.retrieve_task_memory(query, top_k=limit, workspace_id=self.workspace_id)

    # -- static control -----------------------------------------------------------------------------

    async def record(self, msgs: list[Msg | None], **kwargs: Any) -> FlowResult | None:
        """Record the messages not recorded before; returns the service's response (None when nothing was new)."""
        fresh = [
            m for m in ([msgs] if isinstance(msgs, Msg) else msgs) if m is not None and m.id not in self._recorded_ids
        ]
        messages = to_messages(fresh)
        if not any(m["role"] == "user" for m in messages):
            return None
        result = await self._summarise(messages)
        self._recorded_ids.update(m.id for m in fresh)
        return result

    async def retrieve(self, msg: Msg | list[Msg] | None, limit: int = 5, **kwargs: Any) -> str:
        """The memories relevant to the message(s), as text for the system prompt ("" when none)."""
        query = _query_of(msg)
        if not query:
            return ""
        result = await self._search(query, limit)
        return result.answer if isinstance(result.answer, str) and result.memory_list else ""

    # -- agent control (tool functions) -------------------------------------------------------------

    def _recorded_memory(self, item: str, thinking: str) -> dict[str, Any]:
        # The model chose the item on purpose, so it is stored as given: no relevance filter, no rewording.
        origin = {"source": "record_to_memory", "thinking": thinking}
        if self.kind == "task":
            return {"memory_type": "task", "when_to_use": item, "content": item, "metadata": origin}
        return {
            "memory_type": "personal",
            "target": self.user_name,
            "when_to_use": item,
            "content": item,
            "metadata": {"memory_type": "observation", "reflected": False, **origin},
        }

    async def record_to_memory(self, thinking: str, content: list[str], **kwargs: Any) -> ToolResponse:
        """Save information you will need in later conversations, such as the user's preferences, facts about
        them or lessons from a task. Each item should be one specific, self-contained statement (who, what,
        when, where).

        Args:
            thinking (`str`):
                Why these items are worth remembering.
            content (`list[str]`):
                The statements to remember, one per item.
        """
        items = [item.strip() for item in content if item and item.strip()]
        if not items:
            return _text("Nothing to record: content was empty.")
        try:
            memories = [self._recorded_memory(item, thinking) for item in items]
            result = await self.client.vector_store("insert", memory_dicts=memories, workspace_id=self.workspace_id)
        except ReMeError as error:
            logger.warning("record_to_memory failed: %s", error.message)
            return _text(f"Could not record the memory: {error.message}")
        stored = len(result.metadata.get("action_result", {}).get("memory_ids", []))
        return _text(f"Recorded {len(items)} item(s); {stored} memory(ies) stored.", result=result.model_dump())

    async def retrieve_from_memory(self, keywords: list[str], limit: int = 5, **kwargs: Any) -> ToolResponse:
        """Search your long-term memory before answering questions about the user or about tasks you did before.

        Args:
            keywords (`list[str]`):
                Short, specific search phrases, e.g. a person, a topic, a place or a date; one search per phrase.
            limit (`int`, defaults to `5`):
                The most memories to return per phrase.
        """
        seen: dict[str, str] = {}
        try:
            for keyword in (k.strip() for k in keywords):
                if not keyword:
                    continue
                result = await self._search(keyword, limit)
                for memory in result.memory_list:
                    text = str(memory.get("content") or memory.get("when_to_use") or "")
                    seen.setdefault(str(memory.get("memory_id", text)), text)
        except ReMeError as error:
            logger.warning("retrieve_from_memory failed: %s", error.message)
            return _text(f"Could not search the memory: {error.message}")
        if not seen:
            return _text("No memories found for these keywords.")
        lines = [f"- {text}" for text in seen.values()]
        return _text("Memories found:\n" + "\n".join(lines))
