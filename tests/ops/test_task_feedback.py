"""record_task_memory and delete_task_memory: counters on the stored memories, pruning by the stated rule."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from reme_service.services import Services
from reme_service.testing.run_op import op_services, run_flow

pytestmark = pytest.mark.anyio


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    """The ops' services alone (memory store, hash embedder): the flows run without the services (`run_flow`)."""
    async with op_services(tmp_path) as started:
        yield started


async def insert(services: Services, dicts: list[dict[str, Any]], workspace: str = "ws") -> list[str]:
    result = await run_flow(services, "vector_store", workspace_id=workspace, action="insert", memory_dicts=dicts)
    assert result["success"] is True, result
    return result["metadata"]["action_result"]["memory_ids"]


async def listed(services: Services, workspace: str = "ws") -> dict[str, dict[str, Any]]:
    result = await run_flow(services, "vector_store", workspace_id=workspace, action="list")
    return {m["memory_id"]: m for m in result["metadata"]["action_result"]}


async def retrieve(services: Services, query: str, top_k: int = 3) -> list[dict[str, Any]]:
    result = await run_flow(services, "retrieve_task_memory", workspace_id="ws", query=query, top_k=top_k)
    return result["metadata"]["memory_list"]


async def test_record_increments_the_stored_counters_not_the_clients_copy(services: Services) -> None:
    (mid,) = await insert(services, [{"when_to_use": "update the profile", "content": "open settings", "score": 0.7}])
    original = await retrieve(services, "update the profile", top_k=1)
    first = await run_flow(
        services, "record_task_memory", workspace_id="ws", memory_dicts=original, update_utility=True
    )
    assert first["success"] is True, first
    assert first["metadata"]["update_result"] == {"deleted_count": 0, "inserted_count": 1, "updated_count": 1}
    assert first["metadata"]["not_found_memory_ids"] == []
    # The same stale dicts again (ReMe reset the counters from them), with a forged counter and score.
    stale = [{**original[0], "score": 0.01, "metadata": {"freq": 100, "utility": 100}}]
    second = await run_flow(services, "record_task_memory", workspace_id="ws", memory_dicts=stale, update_utility=False)
    assert second["success"] is True
    memory = (await listed(services))[mid]
    assert memory["metadata"] == {"freq": 2, "utility": 1}
    assert memory["score"] == 0.7  # the stored score, never the similarity or the client's value
    assert second["metadata"]["memory_list"][0]["metadata"] == {"freq": 2, "utility": 1}
    assert "relevance" not in memory


async def test_record_lists_unknown_ids_and_counts_duplicates_once(services: Services) -> None:
    (mid,) = await insert(services, [{"when_to_use": "a", "content": "b"}])
    result = await run_flow(
        services,
        "record_task_memory",
        workspace_id="ws",
        memory_dicts=[{"memory_id": mid}, {"memory_id": "nope"}, {"memory_id": mid}],
        update_utility=True,
    )
    assert result["success"] is True
    assert result["metadata"]["not_found_memory_ids"] == ["nope"]
    assert "1 not found" in result["answer"]
    assert (await listed(services))[mid]["metadata"] == {"freq": 1, "utility": 1}


async def test_record_ignores_non_task_memories_and_unknown_workspaces(services: Services) -> None:
    (pid,) = await insert(services, [{"memory_type": "personal", "when_to_use": "likes tea", "content": "tea"}])
    result = await run_flow(
        services, "record_task_memory", workspace_id="ws", memory_dicts=[{"memory_id": pid}], update_utility=True
    )
    assert result["metadata"]["not_found_memory_ids"] == [pid]
    assert (await listed(services))[pid]["metadata"] == {}
    result = await run_flow(
        services, "record_task_memory", workspace_id="elsewhere", memory_dicts=[{"memory_id": pid}], update_utility=True
    )
    assert result["success"] is True and result["metadata"]["not_found_memory_ids"] == [pid]


async def test_record_without_a_memory_id_is_400_and_empty_list_is_a_no_op(services: Services) -> None:
    result = await run_flow(
        services, "record_task_memory", workspace_id="ws", memory_dicts=[{"when_to_use": "x"}], update_utility=True
    )
    assert result["success"] is False
    assert result["metadata"]["error"]["code"] == "invalid_request"
    assert "memory_dicts[0] has no memory_id" in result["metadata"]["error"]["message"]
    result = await run_flow(services, "record_task_memory", workspace_id="ws", memory_dicts=[], update_utility=True)
    assert result["success"] is True and result["metadata"]["memory_list"] == []


async def test_concurrent_records_lose_no_increment(services: Services) -> None:
    ids = await insert(services, [{"when_to_use": f"task {i}", "content": "c"} for i in range(3)])
    dicts = [{"memory_id": i} for i in ids]
    calls = [
        run_flow(services, "record_task_memory", workspace_id="ws", memory_dicts=dicts, update_utility=n % 2 == 0)
        for n in range(40)
    ]
    results = await asyncio.gather(*calls)
    assert all(r["success"] for r in results)
    stored = await listed(services)
    assert all(stored[i]["metadata"] == {"freq": 40, "utility": 20} for i in ids)


async def test_delete_applies_the_rule_to_the_stored_counters(services: Services) -> None:
    counters = [(0, 0), (1, 0), (5, 1), (5, 3), (10, 4), (2, "junk")]
    ids = await insert(
        services,
        [
            {"when_to_use": f"m{i}", "content": "c", "metadata": {"freq": f, "utility": u}}
            for i, (f, u) in enumerate(counters)
        ],
    )
    (personal,) = await insert(services, [{"memory_type": "personal", "when_to_use": "p", "metadata": {"freq": 9}}])
    result = await run_flow(services, "delete_task_memory", workspace_id="ws", freq_threshold=2, utility_threshold=0.5)
    assert result["success"] is True, result
    # freq >= 2 and utility / freq < 0.5: (5, 1) -> 0.2, (10, 4) -> 0.4, (2, junk) -> 0; (5, 3) -> 0.6 stays
    assert sorted(result["metadata"]["deleted_memory_ids"]) == sorted([ids[2], ids[4], ids[5]])
    assert result["metadata"]["update_result"] == {"deleted_count": 3, "inserted_count": 0}
    assert set(await listed(services)) == {ids[0], ids[1], ids[3], personal}


async def test_delete_after_records_removes_unhelpful_memories(services: Services) -> None:
    helpful, useless = await insert(services, [{"when_to_use": "helpful", "content": "h"}, {"when_to_use": "u"}])
    for _ in range(3):
        await run_flow(
            services,
            "record_task_memory",
            workspace_id="ws",
            memory_dicts=[{"memory_id": helpful}],
            update_utility=True,
        )
        await run_flow(
            services,
            "record_task_memory",
            workspace_id="ws",
            memory_dicts=[{"memory_id": useless}],
            update_utility=False,
        )
    result = await run_flow(services, "delete_task_memory", workspace_id="ws", freq_threshold=3, utility_threshold=0.5)
    assert result["metadata"]["deleted_memory_ids"] == [useless]
    assert set(await listed(services)) == {helpful}


async def test_delete_with_freq_threshold_below_one_is_400(services: Services) -> None:
    for bad in (0, -3):
        result = await run_flow(
            services, "delete_task_memory", workspace_id="ws", freq_threshold=bad, utility_threshold=0.5
        )
        assert result["success"] is False
        assert result["metadata"]["error"]["code"] == "invalid_request"
        assert "freq_threshold must be at least 1" in result["metadata"]["error"]["message"]


async def test_delete_on_an_unknown_workspace_deletes_nothing(services: Services) -> None:
    result = await run_flow(
        services, "delete_task_memory", workspace_id="never", freq_threshold=1, utility_threshold=0.5
    )
    assert result["success"] is True
    assert result["metadata"]["deleted_memory_ids"] == []
