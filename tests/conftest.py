"""Shared fixtures: the anyio backend, paths to the shared data beside the project, and the test kit's plugin
(`fake_openai`: the fake OpenAI server on loopback, reset around each test)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["reme_service.testing.pytest_plugin"]

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """`../shared/data` beside the project (override with REME_SHARED_DATA)."""
    return Path(os.environ.get("REME_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def shared_file(name: str) -> Path:
    """A file of the shared data, or skip the test saying which file is missing."""
    path = shared_data_dir() / name
    if not path.exists():
        pytest.skip(f"shared data file {path} is absent (set REME_SHARED_DATA to its folder)")
    return path


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"
