"""AgentScope 1.x long-term memory over HTTP: a real `ReActAgent` (agentscope from PyPI) driven by the fake LLM.

The service runs without an LLM (its offline paths); only the agent's model is the fake OpenAI server. Each test
checks what reached the service (through its HTTP API) and what the agent's model was shown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from reme_service.client import ReMeClient, ServiceConnectionError
from reme_service.errors import InvalidRequestError
from reme_service.testing.openai_server import FakeOpenAI, FakeReply
from tests.service.conftest import ServeFn

agentscope = pytest.importorskip(
    "agentscope", reason="agentscope is not installed: `pip install -e '.[agentscope]'` (agentscope 1.0.x)"
)
if not agentscope.__version__.startswith("1."):
    pytest.skip(f"the adapter targets agentscope 1.x, found {agentscope.__version__}", allow_module_level=True)

from agentscope.agent import ReActAgent  # noqa: E402
from agentscope.formatter import OpenAIChatFormatter  # noqa: E402
from agentscope.message import Msg  # noqa: E402
from agentscope.model import OpenAIChatModel  # noqa: E402

from reme_service.integrations.agentscope import ReMeLongTermMemory  # noqa: E402

pytestmark = pytest.mark.service


@pytest.fixture
def service(serve: ServeFn) -> Iterator[tuple[str, ReMeClient]]:
    with serve() as http:
        base_url = str(http.base_url).rstrip("/")
        with ReMeClient(base_url) as client:
            yield base_url, client


class Agents:
    """Builds ReActAgents on the fake LLM and closes their OpenAI clients (agentscope never does)."""

    def __init__(self, llm_url: str) -> None:
        self.llm_url = llm_url
        self.models: list[OpenAIChatModel] = []

    def __call__(self, memory: ReMeLongTermMemory, mode: str) -> ReActAgent:
        # stream=False: agentscope 1.0.21 reads `delta.audio` as a dict, which newer openai clients give as None.
        model = OpenAIChatModel(
            "fake-model", api_key="test-key", stream=False, client_kwargs={"base_url": self.llm_url}
        )
        self.models.append(model)
        agent = ReActAgent(
            name="Friday",
            sys_prompt="You are a helpful assistant.",
            model=model,
            formatter=OpenAIChatFormatter(),
            long_term_memory=memory,
            long_term_memory_mode=mode,  # type: ignore[arg-type]
        )
        agent.set_console_output_enabled(False)
        return agent

    async def __aenter__(self) -> Agents:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for model in self.models:
            await model.client.close()


def _prompt_text(request: dict[str, Any]) -> str:
    parts = []
    for message in request["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(block.get("text", "")) for block in content)
        parts.append(str(content or ""))
    return "\n".join(parts)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_static_control_records_after_a_reply_and_retrieves_before_the_next(
    service: tuple[str, ReMeClient], fake_openai: FakeOpenAI
) -> None:
    base_url, reme = service
    fake, llm_url = fake_openai, fake_openai.base_url

    async def scenario() -> str:
        async with Agents(llm_url) as agent, ReMeLongTermMemory(base_url, user_name="alice") as memory:
            fake.script("Noted, vegetarian dishes only.")
            first = agent(memory, "static_control")
            await first(Msg("alice", "I am vegetarian and I live in Lyon.", "user"))

            fake.script("How about a lentil stew?")
            second = agent(memory, "static_control")  # a new conversation: empty short-term memory
            reply = await second(Msg("alice", "Which vegetarian dish should I cook in Lyon tonight?", "user"))
            return reply.get_text_content() or ""

    assert _run(scenario()) == "How about a lentil stew?"
    # the first conversation reached the service as alice's personal memory, in workspace "alice"
    stored = reme.vector_store("list", workspace_id="alice").metadata["action_result"]
    assert any("vegetarian" in m["content"] and m["memory_type"] == "personal" for m in stored)
    assert not any("Noted, vegetarian dishes only." in m["content"] for m in stored)  # the agent's words are not
    assert fake.ops == ["", ""]  # only the agent's model was called (no X-ReMe-Op): the service used no LLM
    # the second conversation's prompt carried the retrieved memory
    last_prompt = _prompt_text(fake.requests_to("chat")[-1])
    assert "<long_term_memory>" in last_prompt and "I am vegetarian and I live in Lyon." in last_prompt


def test_static_record_sends_only_new_messages_and_never_the_retrieved_text(
    service: tuple[str, ReMeClient], fake_openai: FakeOpenAI
) -> None:
    base_url, reme = service
    fake, llm_url = fake_openai, fake_openai.base_url

    async def scenario() -> None:
        async with Agents(llm_url) as agents, ReMeLongTermMemory(base_url, user_name="bob") as memory:
            agent = agents(memory, "static_control")
            fake.script("Got it.", "Sure.")
            await agent(Msg("bob", "My sister Carla lives in Porto.", "user"))
            await agent(Msg("bob", "I have a cat called Miso.", "user"))

    _run(scenario())
    contents = [m["content"] for m in reme.vector_store("list", workspace_id="bob").metadata["action_result"]]
    assert sum("My sister Carla lives in Porto." in c for c in contents) == 1  # recorded once, not per reply
    assert any("Miso" in c for c in contents)
    assert not any("long_term_memory" in c or "retrieved from long-term memory" in c for c in contents)


def test_agent_control_tools_record_and_retrieve(service: tuple[str, ReMeClient], fake_openai: FakeOpenAI) -> None:
    base_url, reme = service
    fake, llm_url = fake_openai, fake_openai.base_url

    async def scenario() -> str:
        async with Agents(llm_url) as agent, ReMeLongTermMemory(base_url, user_name="alice") as memory:
            fake.script(
                FakeReply(
                    tool_calls=[
                        (
                            "record_to_memory",
                            {"thinking": "a travel preference", "content": ["Alice prefers window seats on trains"]},
                        )
                    ]
                ),
                "I will remember that.",
            )
            await agent(memory, "agent_control")(Msg("alice", "Remember that I prefer window seats on trains.", "user"))
            fake.script(
                FakeReply(tool_calls=[("retrieve_from_memory", {"keywords": ["window seats on trains"]})]),
                "You prefer window seats.",
            )
            reply = await agent(memory, "agent_control")(Msg("alice", "Which seat do I like?", "user"))
            return reply.get_text_content() or ""

    assert _run(scenario()) == "You prefer window seats."
    stored = reme.vector_store("list", workspace_id="alice").metadata["action_result"]
    assert any("window seats on trains" in m["content"] for m in stored)
    chats = fake.requests_to("chat")
    tool_names = {tool["function"]["name"] for tool in chats[0].get("tools", [])}
    assert {"record_to_memory", "retrieve_from_memory"} <= tool_names
    # the model saw the tool's result: the memory found by the service
    assert "Alice prefers window seats on trains" in _prompt_text(chats[-1])
    assert "Recorded 1 item(s)" in _prompt_text(chats[1])


def test_task_kind_keeps_experiences(service: tuple[str, ReMeClient], fake_openai: FakeOpenAI) -> None:
    base_url, reme = service
    fake, llm_url = fake_openai, fake_openai.base_url

    async def scenario() -> str:
        async with (
            Agents(llm_url) as agent,
            ReMeLongTermMemory(base_url, workspace_id="travel_agent", kind="task") as memory,
        ):
            fake.script("Booked the cheapest flight after comparing three airlines.")
            await agent(memory, "static_control")(Msg("user", "Book the cheapest flight to Oslo.", "user"))
            found = await memory.retrieve(Msg("user", "Book a cheap flight to Oslo", "user"))
            tool = await memory.record_to_memory("lesson", ["Compare at least three airlines before booking"])
            assert "Recorded 1 item(s); 1 memory(ies) stored." in str(tool.content[0].get("text") or "")
            return found

    found = _run(scenario())
    assert "Book the cheapest flight to Oslo." in found
    stored = reme.vector_store("list", workspace_id="travel_agent").metadata["action_result"]
    assert {m["memory_type"] for m in stored} == {"task"}
    assert any("three airlines" in m["content"] for m in stored)


def test_errors_raise_in_static_control_and_reach_the_model_as_tool_text(service: tuple[str, ReMeClient]) -> None:
    base_url, _ = service

    async def scenario() -> None:
        async with ReMeLongTermMemory(base_url, workspace_id="../escape") as memory:
            with pytest.raises(InvalidRequestError, match="workspace"):
                await memory.retrieve(Msg("user", "anything", "user"))
            tool = await memory.retrieve_from_memory(["anything"])
            assert "Could not search the memory" in str(tool.content[0].get("text") or "")
        async with ReMeLongTermMemory("http://127.0.0.1:9", user_name="x") as down:
            down.client.retries, down.client.backoff = 1, 0.01
            with pytest.raises(ServiceConnectionError):
                await down.record([Msg("x", "hello there", "user")])
            tool = await down.record_to_memory("t", ["a fact"])
            assert "cannot reach the memory service" in str(tool.content[0].get("text") or "")

    _run(scenario())
