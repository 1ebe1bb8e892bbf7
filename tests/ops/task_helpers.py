"""Helpers of the task-memory op tests: the prompts' markers, scripted replies, trajectories, the app and its store."""

from __future__ import annotations

import json
from typing import Any

from reme_service.app import ReMeApp
from tests.fakes.openai_server import FakeOpenAI

SUCCESS = "completed a task successfully"
FAILURE = "failed at a task"
SOFT = "ended with different scores"
HARD = "closely related tasks"
VALIDATE = "You review experiences"


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


def make_app(url: str, *overrides: str, embed_via_fake: bool = False) -> ReMeApp:
    args = ["vector_store.default.backend=memory", "llm.default.max_retries=0", *overrides]
    if embed_via_fake:
        args += [
            "embedding_model.default.backend=openai_compatible",
            f"embedding_model.default.base_url={url}",
            "embedding_model.default.params.dimensions=64",
            "embedding_model.default.params.max_batch_size=64",
        ]
    else:
        args.append("embedding_model.default.backend=hash")
    return ReMeApp(*args, env={"FLOW_LLM_BASE_URL": url})


async def stored(app: ReMeApp, workspace: str = "ws") -> list[dict[str, Any]]:
    result = await app.async_execute(name="vector_store", workspace_id=workspace, action="list")
    return result["metadata"]["action_result"]


def prompts_with(fake: FakeOpenAI, marker: str) -> list[str]:
    texts = [body["messages"][-1]["content"] for body in fake.requests_to("chat")]
    return [t for t in texts if marker in t]
