"""Op-test fixtures: one fake OpenAI server per test module, reset around each test that asks for `fake`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAI
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
