"""AgentScope 2.x long-term memory over HTTP: `ReMeServiceMiddleware` (AgentScope's own `ReMeMiddleware` hooks and
`memory_search` tool) against a live service. agentscope 2 needs mcp>=2 and cannot share an environment with
agentscope 1.x, which the `test` extra installs: so these tests skip in .venv, and scripts/test_agentscope2.sh (part
of scripts/test.sh) runs them in a venv of their own."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import pytest

from reme_service.client import ReMeClient
from tests.service.conftest import ServeFn

agentscope = pytest.importorskip("agentscope", reason="agentscope is not installed: pip install 'agentscope>=2,<3'")
if not agentscope.__version__.startswith("2."):
    pytest.skip(
        f"the middleware targets agentscope 2.x, found {agentscope.__version__} (scripts/test_agentscope2.sh runs it)",
        allow_module_level=True,
    )

from reme_service.integrations.agentscope2 import ReMeServiceMiddleware, message_dicts  # noqa: E402

pytestmark = pytest.mark.service
message: Any = importlib.import_module("agentscope.message")  # 2.x names, which mypy (beside 1.x) does not know


def test_turns_are_summarised_into_the_users_memory_and_found_by_the_tool(serve: ServeFn) -> None:
    with serve() as http:
        base_url = str(http.base_url).rstrip("/")

        async def scenario() -> tuple[str, list[str]]:
            memory = ReMeServiceMiddleware(base_url, user_name="alice", api_key="")
            try:
                turn = [
                    message.UserMsg(name="alice", content="I am vegetarian and I live in Oslo."),
                    message.AssistantMsg(name="friday", content="Noted: vegetarian, Oslo."),
                ]
                await memory._write_back(turn, "session-1")
                (tool,) = await memory.list_tools()
                chunk = await tool(query="is alice vegetarian?")
                return str(chunk), await memory._search("where does alice live?")
            finally:
                await memory.close()

        tool_text, found = asyncio.run(scenario())
        with ReMeClient(base_url, api_key="") as client:
            stored = client.vector_store("list", workspace_id="alice").metadata["action_result"]
    assert stored, "the turn was summarised into alice's workspace"
    assert "vegetarian" in tool_text
    assert any("Oslo" in text for text in found)


def test_messages_become_role_and_text() -> None:
    blocks: Any = [{"type": "text", "text": "hi"}, {"type": "tool_call", "id": "1", "name": "x", "input": {}}]
    messages = [
        message.UserMsg(name="u", content="hello"),
        {"role": "assistant", "content": blocks},
        {"role": "assistant", "content": []},
    ]
    assert message_dicts(messages) == [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
