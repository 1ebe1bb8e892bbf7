"""Helpers of the personal-memory op tests: the app or the flows they run on, what the store holds, the prompts
the LLM got."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from reme_service.app import ReMeApp
from reme_service.schema.messages import Message
from reme_service.testing.run_op import FlowCaller, Flows, op_services
from reme_service.testing.scripted_llm import ScriptedLLM


@asynccontextmanager
async def personal_app(tmp_path: Path, *overrides: str, llm: ScriptedLLM | None = None) -> AsyncIterator[ReMeApp]:
    """An app on the memory store and hash embeddings; its LLM is the scripted double `llm` if given, else none."""
    async with ReMeApp(
        f"data_dir={tmp_path}",
        "vector_store.default.backend=memory",
        "embedding_model.default.backend=hash",
        *overrides,
        env={},
        llm_clients={"default": llm} if llm is not None else None,
    ) as app:
        yield app


@asynccontextmanager
async def personal_ops(tmp_path: Path, *overrides: str, llm: ScriptedLLM | None = None) -> AsyncIterator[Flows]:
    """The flows alone (`reme_service.testing.run_op`), on the services `personal_app` would have: for the tests
    that need no part of the app (history, events, jobs)."""
    async with op_services(tmp_path, *overrides, llm=llm) as services:
        yield Flows(services)


async def stored(app: FlowCaller, workspace: str) -> list[dict[str, Any]]:
    """Every memory of `workspace`."""
    result = await app.async_execute(name="vector_store", workspace_id=workspace, action="list")
    return result["metadata"]["action_result"]


def last_prompt(messages: Sequence[Message]) -> str:
    """The last message of a chat call (the rendered prompt)."""
    return messages[-1].text if messages else ""
