"""Pytest fixtures of the test kit. Register it in a `conftest.py` at the root of the tests:

```python
pytest_plugins = ["reme_service.testing.pytest_plugin"]
```

- `fake_openai_server`: one `FakeOpenAI` served on loopback for the whole session (starting uvicorn costs ~0.2 s);
- `fake_openai`: that server, reset (no scripted replies, rules, faults or recorded requests, its constructor's
  settings) before and after the test; its OpenAI base URL is `fake_openai.base_url`.

Tests sharing the session's server must not run in parallel in one process; each pytest-xdist worker has its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reme_service.testing.openai_server import FakeOpenAI


@pytest.fixture(scope="session")
def fake_openai_server() -> Iterator[FakeOpenAI]:
    """The session's fake OpenAI server, running; prefer `fake_openai`, which resets it around each test."""
    fake = FakeOpenAI()
    with fake.running():
        yield fake


@pytest.fixture
def fake_openai(fake_openai_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The session's fake OpenAI server, reset before and after the test."""
    fake_openai_server.reset()
    yield fake_openai_server
    fake_openai_server.reset()
