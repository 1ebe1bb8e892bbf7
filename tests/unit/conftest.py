"""Unit-test fixtures: one fake OpenAI server per test module, reset for each test that asks for `fake`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.serve import serve_in_thread


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeOpenAI, str]]:
    """One fake server for the module (starting and stopping uvicorn costs ~0.2 s); `fake` resets it per test."""
    shared = FakeOpenAI()
    with serve_in_thread(shared.app) as url:
        yield shared, url + "/v1"


@pytest.fixture
def fake(server: tuple[FakeOpenAI, str]) -> FakeOpenAI:
    """The module's fake server, reset (no scripted replies, no recorded requests)."""
    server[0].reset()
    return server[0]
