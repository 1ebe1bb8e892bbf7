"""AgentScope 2.x long-term memory backed by this service over HTTP (extra `agentscope2`: agentscope 2.x).

AgentScope 2 replaced 1.x's `LongTermMemoryBase` (our `integrations/agentscope.py`) with middlewares. Its own
`agentscope.middleware.ReMeMiddleware` embeds ReMe 0.4 in the agent's process; `ReMeServiceMiddleware` is that
middleware with the service behind it instead, so an agent gets the same hooks and tool:

- static control: before each reply it searches the user's memories for the user's text
  (`retrieve_personal_memory`) and, before the next reasoning step, adds what it found to the context as a hint;
- agent control: the `memory_search` tool (AgentScope's), answered by the same search;
- after each reply, the turn's messages (user input, assistant steps) go to `summary_personal_memory`, which keeps
  what they say about the user.

```python
from agentscope.agent import Agent
from agentscope.tool import Toolkit
from reme_service.integrations.agentscope2 import ReMeServiceMiddleware

memory = ReMeServiceMiddleware("http://127.0.0.1:8002", user_name="alice", mode="both")
agent = Agent(..., toolkit=Toolkit(tools=await memory.list_tools()), middlewares=[memory])
...
await memory.close()
```

Written against agentscope 2.0.x (checked with 2.0.11): it keeps `ReMeMiddleware`'s hooks and replaces the one
method through which they reach ReMe (`_run_job`, jobs `search` and `auto_memory`) and its app's start and close.
agentscope 2 requires `mcp>=2`, so it installs beside the service only once the core dependencies allow mcp 2; it
cannot share an environment with agentscope 1.x (the `agentscope` extra).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel

from reme_service.client import DEFAULT_BASE_URL, AsyncReMeClient

_middleware: Any = importlib.import_module("agentscope.middleware")
_ROLES = frozenset({"user", "assistant", "system"})


class SearchAnswer(BaseModel):
    """What `ReMeMiddleware` reads from a `search` job: `metadata.results` of `{text}` chunks."""

    success: bool = True
    answer: str = ""
    metadata: dict[str, Any]


def message_dicts(messages: Sequence[Any]) -> list[dict[str, str]]:
    """AgentScope 2 messages (or their JSON dumps) as the service's chat messages: role and text; tool calls and
    messages without text are left out (the summary flow reads what was said)."""
    result = []
    for message in messages:
        data = message if isinstance(message, dict) else message.model_dump(mode="json")
        content = data.get("content")
        if isinstance(content, str):
            text = content
        else:
            text = "\n".join(
                str(block.get("text", ""))
                for block in content or []
                if isinstance(block, dict) and block.get("type") == "text"
            )
        role = str(data.get("role", "user"))
        if text.strip():
            result.append({"role": role if role in _ROLES else "assistant", "content": text.strip()})
    return result


class ReMeServiceMiddleware(_middleware.ReMeMiddleware):  # type: ignore[misc]
    """AgentScope 2's `ReMeMiddleware`, with this service (over HTTP) as its ReMe.

    `user_name`'s personal memories live in `workspace_id` (default: the user name); `mode` is AgentScope's
    (`static_control`, `agent_control` or `both`), `top_k` the memories one search answers. `api_key` defaults to
    `REME_API_KEY`.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        user_name: str,
        workspace_id: str | None = None,
        mode: Literal["static_control", "agent_control", "both"] = "both",
        top_k: int = 5,
        api_key: str | None = None,
        timeout: float = 120.0,
    ) -> None:
        if not user_name.strip():
            raise ValueError("user_name must not be empty")
        super().__init__(parameters=_middleware.ReMeMiddleware.Parameters(mode=mode, top_k=top_k))
        self.user_name = user_name
        self.workspace_id = workspace_id or user_name
        self.client = AsyncReMeClient(base_url, workspace_id=self.workspace_id, api_key=api_key, timeout=timeout)

    async def _ensure_started(self) -> None:
        """Nothing to start: the service is already running."""

    async def close(self) -> None:
        """Close the HTTP client."""
        await self.client.aclose()

    async def _run_job(self, name: str, **kwargs: Any) -> Any:
        """The service's answer to ReMeMiddleware's job `name` (`search` or `auto_memory`); failures raise the
        service's errors (`reme_service.errors`), which the middleware logs or hands the model as the tool's text."""
        if name == "search":
            found = await self.client.retrieve_personal_memory(
                str(kwargs["query"]), top_k=max(1, min(int(kwargs.get("limit") or 5), 50)), user_name=self.user_name
            )
            texts = [str(memory.get("content", "")) for memory in found.memory_list if memory.get("content")]
            return SearchAnswer(answer=str(found.answer), metadata={"results": [{"text": text} for text in texts]})
        if name == "auto_memory":
            messages = message_dicts(kwargs.get("messages") or [])
            if not messages:
                return SearchAnswer(metadata={})
            written = await self.client.summary_personal_memory(messages=messages, user_name=self.user_name)
            return SearchAnswer(answer=str(written.answer), metadata=written.metadata)
        raise ValueError(f"ReMeServiceMiddleware has no job {name!r}")


__all__ = ["ReMeServiceMiddleware", "message_dicts"]
