"""Service fixtures: the real app served by uvicorn on loopback, and a fake OpenAI server beside it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import httpx
import pytest

from reme_service.app import ReMeApp
from reme_service.server.http import create_http_app
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.serve import serve_in_thread

ServeFn = Callable[..., AbstractContextManager[httpx.Client]]


@pytest.fixture(scope="session")
def fake_openai() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    with serve_in_thread(fake.app) as base_url:
        yield fake, f"{base_url}/v1"


@pytest.fixture
def fake_llm(fake_openai: tuple[FakeOpenAI, str]) -> Iterator[tuple[FakeOpenAI, str]]:
    fake, url = fake_openai
    fake.reset()
    yield fake, url
    fake.reset()


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ServeFn:
    """`serve(*overrides, env=...)` starts the service (hash embedder, local store in tmp_path by default)."""
    monkeypatch.chdir(tmp_path)

    @contextmanager
    def _serve(*overrides: str, env: dict[str, str] | None = None) -> Iterator[httpx.Client]:
        app = ReMeApp(
            f"data_dir={tmp_path / 'data'}",
            "embedding_model.default.backend=hash",
            *overrides,
            env=env or {},
        )
        with serve_in_thread(create_http_app(app)) as base_url, httpx.Client(base_url=base_url, timeout=30) as client:
            yield client

    return _serve
