"""Op-test fixtures: a scripted in-process LLM (`llm`), and one fake OpenAI server per test module, reset around
each test that asks for `fake` (for the embedding client, and for tests of the OpenAI transport)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.scripted_llm import ScriptedLLM
from tests.fakes.serve import serve_in_thread


@pytest.fixture(scope="module")
def fake_server() -> Iterator[tuple[FakeOpenAI, str]]:
    """The module's fake server and its OpenAI base URL (`.../v1`)."""
    server = FakeOpenAI()
    with serve_in_thread(server.app) as url:
        yield server, f"{url}/v1"


@pytest.fixture
def fake(fake_server: tuple[FakeOpenAI, str]) -> Iterator[tuple[FakeOpenAI, str]]:
    """`fake_server`, reset (no scripted replies, no recorded requests) before and after the test."""
    server, url = fake_server
    server.reset()
    yield server, url
    server.reset()


@pytest.fixture
def llm() -> ScriptedLLM:
    """A fresh scripted LLM: script it per op (`llm.on("SuccessExtractionOp", reply)`), give it to the app."""
    return ScriptedLLM()
