"""chat_parsed re-asks on malformed replies and reports after the last attempt (fake server on loopback)."""

from __future__ import annotations

import pytest

from reme_service.errors import LLMReplyError
from reme_service.providers.llm.json_extract import extract_json_object
from reme_service.providers.llm.openai_compatible import OpenAICompatibleLLM
from reme_service.providers.llm.structured import chat_parsed
from reme_service.schema.messages import Message
from reme_service.testing.openai_server import FakeOpenAI

pytestmark = pytest.mark.anyio


async def test_malformed_then_valid_reply_is_parsed(fake_openai: FakeOpenAI) -> None:
    server, url = fake_openai, fake_openai.base_url
    server.script("no json here", '```json\n{"ok": true}\n```')
    llm = OpenAICompatibleLLM(model_name="m", base_url=url, backoff=0.01)
    try:
        result = await chat_parsed(llm, [Message(content="hi")], extract_json_object)
    finally:
        await llm.close()
    assert result == {"ok": True}
    assert len(server.requests_to("chat")) == 2


async def test_always_malformed_raises_with_the_last_reply(fake_openai: FakeOpenAI) -> None:
    server, url = fake_openai, fake_openai.base_url
    server.script("nope 1", "nope 2", "nope 3")
    llm = OpenAICompatibleLLM(model_name="m", base_url=url, backoff=0.01)
    try:
        with pytest.raises(LLMReplyError, match="nope 3"):
            await chat_parsed(llm, [Message(content="hi")], extract_json_object, attempts=3, what="validation")
    finally:
        await llm.close()
    assert len(server.requests_to("chat")) == 3
