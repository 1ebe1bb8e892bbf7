"""Work on many items leaves the event loop: an `insert` of many memories is converted, a large answer (even to a
small request: `list` of a big workspace) dumped and encoded, and a job's request dumped, hashed and validated, its
answer dumped and (when large) encoded for `GET /jobs/{id}`, in worker threads; small ones stay inline, where a
thread hop would cost more than the work (`concurrency.off_loop_if`, `OFF_LOOP_ITEMS`, `holds_many`).

A stall is hard to assert without timing, so each test wraps the function that does the heavy work (on the module
attribute the code calls) and records the thread it ran in: the event loop's (this test's) or a worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import orjson
import pytest

import reme_service.app as app_module
import reme_service.jobs.flow_jobs as flow_jobs_module
import reme_service.ops.vector_store.vector_store_action_op as action_module
import reme_service.server.http as http_module
import reme_service.server.job_routes as job_routes_module
from reme_service.app import ReMeApp
from reme_service.concurrency import OFF_LOOP_ITEMS, holds_many
from reme_service.server.http import create_http_app

pytestmark = pytest.mark.anyio

MANY = OFF_LOOP_ITEMS + 1


def record_threads(monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str) -> list[threading.Thread]:
    """Wrap `module.name` so that every call records the thread it runs in; returns that record."""
    seen: list[threading.Thread] = []
    original: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.current_thread())
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return seen


def dicts(count: int) -> list[dict[str, Any]]:
    return [{"content": f"memory {i} about topic {i % 7}", "when_to_use": f"when {i}"} for i in range(count)]


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[ReMeApp]:
    async with ReMeApp(f"data_dir={tmp_path}", "embedding_model.default.backend=hash", env={}) as started:
        yield started


@pytest.fixture
async def client(app: ReMeApp) -> AsyncIterator[httpx.AsyncClient]:
    api = create_http_app(app, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://localhost") as http:
        yield http


def test_holds_many_counts_lists_in_the_answer_and_in_metadata_three_levels_deep() -> None:
    few = ["m"] * (OFF_LOOP_ITEMS - 10)
    assert not holds_many("a long answer " * 10_000, {"memory_list": few})  # dict keys count as items too
    assert not holds_many(["m"] * OFF_LOOP_ITEMS, {})
    assert holds_many(["m"] * MANY, {})  # the answer: messages
    assert holds_many("", {"memory_list": few, "other": ["x"] * 20})
    assert holds_many("", {"action_result": {"size": MANY, "memory_ids": ["id"] * MANY}})  # insert's answer
    assert not holds_many(None, None)


async def test_a_large_insert_is_converted_in_a_worker_thread_a_small_one_inline(
    app: ReMeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = record_threads(monkeypatch, action_module, "_nodes_of")
    loop_thread = threading.current_thread()
    small = await app.async_execute("vector_store", workspace_id="w", action="insert", memory_dicts=dicts(3))
    large = await app.async_execute("vector_store", workspace_id="w", action="insert", memory_dicts=dicts(MANY))
    assert small["metadata"]["action_result"]["size"] == 3 and large["metadata"]["action_result"]["size"] == MANY
    assert seen[0] is loop_thread
    assert seen[1] is not loop_thread
    # a bad memory among many is still the 400 that names it, raised from the worker thread
    bad = [*dicts(MANY), {"content": 5}]
    refused = await app.async_execute("vector_store", workspace_id="w", action="insert", memory_dicts=bad)
    assert refused["success"] is False and refused["metadata"]["error"]["code"] == "invalid_request"
    assert f"memory_dicts[{MANY}]" in refused["metadata"]["error"]["message"]


async def test_a_large_answer_to_a_small_request_is_dumped_and_encoded_in_worker_threads(
    app: ReMeApp, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await app.async_execute("vector_store", workspace_id="big", action="insert", memory_dicts=dicts(MANY))
    dumped = record_threads(monkeypatch, app_module, "_dump_releasing")
    encoded = record_threads(monkeypatch, http_module, "_encode_releasing")
    loop_thread = threading.current_thread()

    few = await client.post("/vector_store", json={"workspace_id": "big", "action": "list", "limit": 5})
    assert len(few.json()["metadata"]["action_result"]) == 5
    assert dumped == [loop_thread] and encoded == [loop_thread]  # a small answer: inline, no thread hop

    every = await client.post("/vector_store", json={"workspace_id": "big", "action": "list"})
    assert len(every.json()["metadata"]["action_result"]) == MANY
    assert dumped[1] is not loop_thread and encoded[1] is not loop_thread


async def test_a_job_is_dumped_hashed_validated_and_its_large_answer_encoded_off_the_loop(
    app: ReMeApp, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await app.async_execute("vector_store", workspace_id="big", action="insert", memory_dicts=dicts(MANY))
    hashed = record_threads(monkeypatch, flow_jobs_module, "_job_body")
    validated = record_threads(monkeypatch, flow_jobs_module, "_validate")
    dumped = record_threads(monkeypatch, app_module, "_dump_releasing")
    viewed = record_threads(monkeypatch, job_routes_module, "_view_json")
    loop_thread = threading.current_thread()

    async def run_job(body: dict[str, Any]) -> dict[str, Any]:
        accepted = await client.post("/vector_store", json={**body, "async": True})
        assert accepted.status_code == 202
        done = await client.get(f"/jobs/{accepted.json()['job_id']}", params={"wait": 30})
        view: dict[str, Any] = orjson.loads(done.content)
        assert view["status"] == "done"
        return view

    small = await run_job({"workspace_id": "big", "action": "list", "limit": 2})
    assert len(small["result"]["metadata"]["action_result"]) == 2
    # submitted and run off the loop whatever their size (a job waits for worker threads anyway); a small answer
    # is encoded inline
    assert hashed[0] is not loop_thread and validated[0] is not loop_thread and dumped[0] is not loop_thread
    assert viewed == [loop_thread]

    large = await run_job({"workspace_id": "big", "action": "list"})
    assert len(large["result"]["metadata"]["action_result"]) == MANY
    assert hashed[1] is not loop_thread and validated[1] is not loop_thread and dumped[1] is not loop_thread
    assert viewed[1] is not loop_thread


def test_a_large_answer_is_dumped_and_encoded_in_pieces_exactly_as_in_one_call() -> None:
    """`json_pieces` gives what one `model_dump(mode="json")` / `orjson.dumps` gives, in calls of at most CHUNK
    list items (one call would hold the GIL, so the event loop, however it is run off the loop)."""
    from datetime import UTC, datetime

    from reme_service.flow.context import FlowResponse
    from reme_service.json_pieces import CHUNK, encode, model_json_ready

    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    memories = [{"memory_id": f"m{i}", "score": i / 3, "time": when, "tags": ("a", i)} for i in range(3 * CHUNK + 7)]
    response = FlowResponse(
        answer=[{"role": "user", "content": f"message {i}"} for i in range(CHUNK + 1)],
        metadata={
            "action_result": {"size": 2, "memory_ids": [f"id{i}" for i in range(2 * CHUNK)], "when": when},
            "memory_list": memories,
            "ids": {1, 2},
            "nested": {"deeper": {"deepest": {"list": list(range(CHUNK * 2))}}},
            "empty": {},
            "none": None,
        },
    )
    dumped = model_json_ready(response)
    assert dumped == response.model_dump(mode="json")
    assert list(dumped) == ["answer", "success", "metadata"]
    assert encode(dumped) == orjson.dumps(dumped)
    assert encode({"job": {"result": dumped}}) == orjson.dumps({"job": {"result": dumped}})
