"""`OpenAICompatibleLLM` and `NoLLM` against the fake OpenAI server, through the real openai client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, TypedDict

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from reme_service.errors import LLMError, LLMReplyError
from reme_service.flow.current_op import current_op
from reme_service.providers.llm.none import NoLLM
from reme_service.providers.llm.openai_compatible import OpenAICompatibleLLM, backoff_delay
from reme_service.schema.messages import Message, Role
from reme_service.testing.openai_server import DEFAULT_REPLY, FakeOpenAI, FakeReply
from reme_service.testing.ports import free_port
from tests.conditions import until

pytestmark = pytest.mark.anyio


class Fast(TypedDict):
    backoff: float
    timeout: float


FAST: Fast = {"backoff": 0.001, "timeout": 5.0}


@pytest.fixture
def base_url(fake_openai: FakeOpenAI) -> str:
    return fake_openai.base_url


@pytest.fixture
async def llm(base_url: str) -> AsyncIterator[OpenAICompatibleLLM]:
    client = OpenAICompatibleLLM(model_name="qwen-test", api_key="sk-test", base_url=base_url, max_retries=2, **FAST)
    yield client
    await client.close()


def user(text: str) -> list[Message]:
    return [Message(role=Role.SYSTEM, content="You are terse."), Message(role=Role.USER, content=text)]


def chat_bodies(fake_openai: FakeOpenAI) -> list[dict[str, Any]]:
    return fake_openai.requests_to("chat")


# ---------------------------------------------------------------------- aggregation


async def test_streamed_content_is_concatenated(fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM) -> None:
    fake_openai.script("The quick brown fox jumps over the lazy dog.")
    reply = await llm.chat(user("hi"))
    assert reply.role is Role.ASSISTANT
    assert reply.content == "The quick brown fox jumps over the lazy dog."
    assert reply.reasoning_content == ""
    assert reply.tool_calls == []
    assert reply.metadata["finish_reason"] == "stop"
    assert reply.metadata["usage"]["total_tokens"] > 0


async def test_reasoning_content_and_several_tool_calls(fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM) -> None:
    fake_openai.script(
        FakeReply(
            content="Let me look.",
            reasoning="The user wants two lookups; 先查天气。",
            tool_calls=[
                ("get_weather", {"city": "杭州", "unit": "celsius"}),
                ("search", '{"query": "long query text that spans several chunks", "top_k": 5}'),
                ("noop", {}),
            ],
        )
    )
    reply = await llm.chat(user("weather?"), tools=[{"type": "function", "function": {"name": "get_weather"}}])
    assert reply.content == "Let me look."
    assert reply.reasoning_content == "The user wants two lookups; 先查天气。"
    assert [tc.name for tc in reply.tool_calls] == ["get_weather", "search", "noop"]
    assert [tc.index for tc in reply.tool_calls] == [0, 1, 2]
    assert json.loads(reply.tool_calls[0].arguments) == {"city": "杭州", "unit": "celsius"}
    assert json.loads(reply.tool_calls[1].arguments) == {
        "query": "long query text that spans several chunks",
        "top_k": 5,
    }
    assert json.loads(reply.tool_calls[2].arguments) == {}
    assert all(tc.id for tc in reply.tool_calls)
    assert len({tc.id for tc in reply.tool_calls}) == 3
    assert reply.metadata["finish_reason"] == "tool_calls"


async def test_tool_calls_without_content_are_not_empty(fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM) -> None:
    fake_openai.script(FakeReply(tool_calls=[("remember", {"text": "x"})]))
    reply = await llm.chat(user("store it"))
    assert reply.content == ""
    assert reply.tool_calls[0].name == "remember"
    assert len(chat_bodies(fake_openai)) == 1


async def test_rules_and_default_reply(fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM) -> None:
    fake_openai.on("weather", "It is sunny.")
    fake_openai.on("You are terse", "system matched", anywhere=True)
    assert (await llm.chat(user("what's the weather like?"))).content == "It is sunny."
    assert (await llm.chat(user("something else"))).content == "system matched"
    assert (await llm.chat([Message(content="plain")])).content == DEFAULT_REPLY


# ---------------------------------------------------------------------- request shape


async def test_params_settings_and_tools_are_forwarded(fake_openai: FakeOpenAI, base_url: str) -> None:
    llm = OpenAICompatibleLLM(
        model_name="qwen-test", base_url=base_url, params={"temperature": 0.1, "top_k": 5}, **FAST
    )
    try:
        tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
        await llm.chat(user("hi"), tools=tools, temperature=0.7, enable_thinking=False, seed=3)
        await llm.chat(user("again"), model="other-model")
    finally:
        await llm.close()
    first, second = chat_bodies(fake_openai)
    assert first["model"] == "qwen-test"
    assert first["stream"] is True
    assert first["stream_options"] == {"include_usage": True}
    assert first["temperature"] == 0.7
    assert first["top_k"] == 5
    assert first["enable_thinking"] is False
    assert first["seed"] == 3
    assert first["tools"] == tools
    assert first["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
    ]
    assert second["model"] == "other-model"
    assert second["temperature"] == 0.1
    assert "tools" not in second


async def test_dict_messages_are_accepted(fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM) -> None:
    await llm.chat([{"role": "user", "content": "raw dict"}])
    assert chat_bodies(fake_openai)[0]["messages"] == [{"role": "user", "content": "raw dict"}]


async def test_fake_non_streaming_path_with_the_raw_client(fake_openai: FakeOpenAI, base_url: str) -> None:
    fake_openai.script(FakeReply(content="plain JSON", reasoning="why", tool_calls=[("f", {"a": 1})]))
    async with openai.AsyncOpenAI(api_key="k", base_url=base_url, max_retries=0) as client:
        completion = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])
    choice = completion.choices[0]
    assert choice.message.content == "plain JSON"
    assert (choice.message.model_extra or {})["reasoning_content"] == "why"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.function.name == "f"
    assert json.loads(call.function.arguments) == {"a": 1}
    assert choice.finish_reason == "tool_calls"
    assert completion.usage is not None


async def test_paths_without_v1_prefix(fake_openai: FakeOpenAI, base_url: str) -> None:
    llm = OpenAICompatibleLLM(model_name="m", base_url=base_url.removesuffix("/v1"), **FAST)
    try:
        assert (await llm.chat(user("hi"))).content == DEFAULT_REPLY
    finally:
        await llm.close()
    assert fake_openai.requests[0][0] == "/chat/completions"


# ---------------------------------------------------------------------- retries and errors


async def test_server_error_then_success_is_retried(fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM) -> None:
    fake_openai.fail_next(2, status=500)
    fake_openai.script("finally")
    assert (await llm.chat(user("hi"))).content == "finally"
    assert len(chat_bodies(fake_openai)) == 3


async def test_rate_limit_is_retried(fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM) -> None:
    fake_openai.fail_next(1, status=429, message="slow down")
    assert (await llm.chat(user("hi"))).content == DEFAULT_REPLY
    assert len(chat_bodies(fake_openai)) == 2


async def test_persistent_server_error_raises_with_provider_message(
    fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM
) -> None:
    fake_openai.fail_next(10, status=503, message="model is overloaded, try later")
    with pytest.raises(LLMError) as caught:
        await llm.chat(user("hi"))
    assert "model is overloaded, try later" in str(caught.value)
    assert "503" in str(caught.value)
    assert caught.value.status == 502
    assert caught.value.details["attempts"] == 3
    assert not isinstance(caught.value, LLMReplyError)  # the provider is down, not the reply unusable
    assert len(chat_bodies(fake_openai)) == 3


async def test_client_error_is_not_retried(fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM) -> None:
    fake_openai.fail_next(5, status=400, message="Range of temperature should be [0.0, 2.0)")
    with pytest.raises(LLMError) as caught:
        await llm.chat(user("hi"))
    assert "Range of temperature" in str(caught.value)
    assert "400" in str(caught.value)
    assert len(chat_bodies(fake_openai)) == 1


async def test_non_json_error_body_is_reported(fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM) -> None:
    fake_openai.fail_next(1, status=401, body="invalid api key, plain text")
    with pytest.raises(LLMError, match="invalid api key, plain text"):
        await llm.chat(user("hi"))
    assert len(chat_bodies(fake_openai)) == 1


async def test_empty_reply_is_retried_then_fails(fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM) -> None:
    fake_openai.script(FakeReply(), "second time lucky")
    assert (await llm.chat(user("hi"))).content == "second time lucky"
    fake_openai.script(FakeReply(), FakeReply(reasoning="only thoughts"), FakeReply(content="   "))
    with pytest.raises(LLMReplyError, match="empty reply") as caught:
        await llm.chat(user("hi"))
    assert (caught.value.code, caught.value.status) == ("llm_error", 502)  # an LLMError on the wire
    assert len(chat_bodies(fake_openai)) == 2 + 3


async def test_malformed_stream_is_retried(fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM) -> None:
    fake_openai.fail_next(1, malformed=True)
    fake_openai.script("recovered")
    assert (await llm.chat(user("hi"))).content == "recovered"
    fake_openai.fail_next(3, malformed=True)
    with pytest.raises(LLMError, match="malformed"):
        await llm.chat(user("hi"))


async def test_timeout_raises_llm_error(fake_openai: FakeOpenAI, base_url: str) -> None:
    fake_openai.delay_next(5, seconds=3.0)
    llm = OpenAICompatibleLLM(model_name="m", base_url=base_url, max_retries=1, timeout=0.2, backoff=0.001)
    try:
        with pytest.raises(LLMError, match="timed out"):
            await llm.chat(user("hi"))
    finally:
        await llm.close()
    # the server may record the second attempt after the client gave up on it: wait for it, then no third comes
    await until(lambda: len(chat_bodies(fake_openai)) >= 2)
    assert len(chat_bodies(fake_openai)) == 2


async def test_connection_refused_raises_llm_error() -> None:
    port = free_port()
    llm = OpenAICompatibleLLM(model_name="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, **FAST)
    try:
        with pytest.raises(LLMError, match="connection error"):
            await llm.chat(user("hi"))
    finally:
        await llm.close()


async def test_zero_retries_means_one_attempt(fake_openai: FakeOpenAI, base_url: str) -> None:
    fake_openai.fail_next(2, status=500, message="boom")
    llm = OpenAICompatibleLLM(model_name="m", base_url=base_url, max_retries=0, **FAST)
    try:
        with pytest.raises(LLMError, match="after 1 attempt: HTTP 500: boom"):
            await llm.chat(user("hi"))
    finally:
        await llm.close()
    assert len(chat_bodies(fake_openai)) == 1


async def test_injected_http_client_is_used_and_left_open(fake_openai: FakeOpenAI, base_url: str) -> None:
    async with httpx.AsyncClient() as http_client:
        llm = OpenAICompatibleLLM(model_name="m", base_url=base_url, http_client=http_client, **FAST)
        assert (await llm.chat(user("hi"))).content == DEFAULT_REPLY
        await llm.close()
        assert not http_client.is_closed
    assert len(chat_bodies(fake_openai)) == 1


async def test_health(llm: OpenAICompatibleLLM) -> None:
    assert await llm.health() == {"status": "ok", "backend": "openai_compatible", "model": "qwen-test"}


def test_backoff_is_exponential_jittered_and_capped() -> None:
    for attempt in range(1, 12):
        delay = backoff_delay(attempt, 0.5, cap=4.0)
        base = min(4.0, 0.5 * 2 ** (attempt - 1))
        assert base / 2 <= delay <= base


def test_constructor_validates_options() -> None:
    with pytest.raises(ValueError):
        OpenAICompatibleLLM(model_name="m", max_retries=-1)
    with pytest.raises(ValueError):
        OpenAICompatibleLLM(model_name="m", timeout=0)


# ---------------------------------------------------------------------- none backend


async def test_no_llm_raises() -> None:
    llm = NoLLM()
    assert llm.available is False
    assert llm.backend == "none"
    with pytest.raises(LLMError, match="no LLM is configured"):
        await llm.chat(user("hi"))
    assert (await llm.health())["status"] == "disabled"


# ---------------------------------------------------------------------- the calling op


async def test_each_call_names_the_op_that_makes_it(fake_openai: FakeOpenAI, llm: OpenAICompatibleLLM) -> None:
    fake_openai.on_op("RerankMemoryOp", "ranked").on_op("RewriteMemoryOp", "rewritten")
    token = current_op.set("RerankMemoryOp")
    try:
        first = await llm.chat(user("a"))
    finally:
        current_op.reset(token)
    token = current_op.set("RewriteMemoryOp")
    try:
        second = await llm.chat(user("b"))
    finally:
        current_op.reset(token)
    outside = await llm.chat(user("c"))
    assert (first.text, second.text, outside.text) == ("ranked", "rewritten", DEFAULT_REPLY)
    assert fake_openai.ops == ["RerankMemoryOp", "RewriteMemoryOp", ""]
