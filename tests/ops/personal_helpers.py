"""Helpers of the personal-memory op tests: the app they run on, the store's content, the prompts the LLM got."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from reme_service.app import ReMeApp


@asynccontextmanager
async def personal_app(tmp_path: Path, *overrides: str, llm_url: str | None = None) -> AsyncIterator[ReMeApp]:
    """An app on the memory store and hash embeddings, with no LLM retries; its LLM is at `llm_url` if given."""
    env = {"FLOW_LLM_BASE_URL": llm_url} if llm_url else {}
    async with ReMeApp(
        f"data_dir={tmp_path}",
        "vector_store.default.backend=memory",
        "embedding_model.default.backend=hash",
        "llm.default.max_retries=0",
        *overrides,
        env=env,
    ) as app:
        yield app


async def stored(app: ReMeApp, workspace: str) -> list[dict[str, Any]]:
    """Every memory of `workspace`."""
    result = await app.async_execute(name="vector_store", workspace_id=workspace, action="list")
    return result["metadata"]["action_result"]


def last_prompt(body: dict[str, Any]) -> str:
    """The last message of a chat request the fake server received."""
    return str(body["messages"][-1]["content"])
