"""Helpers of the task-memory op tests: scripted replies, trajectories, the app (on a `ScriptedLLM`) and its store."""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from reme_service.testing.run_op import FlowCaller, Flows, op_services
from reme_service.testing.scripted_llm import ScriptedLLM


def item(when: str, experience: str, **extra: Any) -> dict[str, Any]:
    return {"when_to_use": when, "experience": experience, "tags": ["t"], "confidence": 0.8, **extra}


def fenced(value: Any) -> str:
    return f"```json\n{json.dumps(value)}\n```"


def verdict(valid: bool = True, score: float = 0.9) -> str:
    return fenced({"is_valid": valid, "score": score, "feedback": "fine", "recommendations": ""})


def trajectory(task: str, score: float, steps: int = 2, task_id: str = "t") -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for i in range(steps):
        messages.append(
            {
                "role": "assistant",
                "content": f"step {i}",
                "tool_calls": [{"id": f"c{i}", "function": {"name": "search", "arguments": f'{{"q": "{i}"}}'}}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"})
    messages.append({"role": "assistant", "content": "done"})
    return {"task_id": task_id, "messages": messages, "score": score, "metadata": {"query": task}}


@asynccontextmanager
async def make_app(llm: ScriptedLLM, *overrides: str, embed_url: str | None = None) -> AsyncIterator[Flows]:
    """The flows with `llm` as their default LLM, on the memory store (`reme_service.testing.run_op`, no app);
    embeddings by the hash embedder, or by the fake server at `embed_url`."""
    args = list(overrides)
    if embed_url is not None:
        args += [
            "embedding_model.default.backend=openai_compatible",
            f"embedding_model.default.base_url={embed_url}",
            "embedding_model.default.params.dimensions=64",
            "embedding_model.default.params.max_batch_size=64",
        ]
    with tempfile.TemporaryDirectory() as data_dir:
        async with op_services(Path(data_dir), *args, llm=llm) as services:
            yield Flows(services)


@asynccontextmanager
async def make_wire_app(url: str) -> AsyncIterator[Flows]:
    """The flows with their LLM on the fake OpenAI server at `url` (no client retries): for what the transport does."""
    with tempfile.TemporaryDirectory() as data_dir:
        async with op_services(Path(data_dir), "llm.default.max_retries=0", env={"FLOW_LLM_BASE_URL": url}) as services:
            yield Flows(services)


async def stored(app: FlowCaller, workspace: str = "ws") -> list[dict[str, Any]]:
    result = await app.async_execute(name="vector_store", workspace_id=workspace, action="list")
    return result["metadata"]["action_result"]


def prompts_of(llm: ScriptedLLM, op: str) -> list[str]:
    """The prompts `op` sent, in the order it sent them."""
    return [call.prompt for call in llm.calls_of(op)]
