"""One memory's size is bounded on every path that writes memories (`storage/bounds.py`): a write holding a memory
over `vector_store.<name>.max_memory_bytes` is refused whole with 413, naming the memory and the limit, and nothing
of it is stored; a memory exactly at the limit is stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.config.models import VectorStoreConfig
from reme_service.schema.memory import memory_from_dict
from reme_service.storage.bounds import DEFAULT_MAX_MEMORY_BYTES, node_bytes
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

LIMIT = 4096
SMALL = f"vector_store.default.max_memory_bytes={LIMIT}"


def memory(memory_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "memory_id": memory_id,
        "memory_type": "task",
        "when_to_use": f"when deploying {memory_id}",
        "content": "",
        "time_created": "2026-11-01 10:00:00",
        "time_modified": "2026-11-01 10:00:00",
        **fields,
    }


def sized(memory_id: str, size: int, workspace: str = "ws") -> dict[str, Any]:
    """A memory whose stored size (`node_bytes`) is exactly `size` bytes."""
    base = memory(memory_id)
    node = memory_from_dict({**base, "workspace_id": workspace}).to_vector_node()
    pad = size - node_bytes(node)
    assert pad >= 0
    return {**base, "content": "x" * pad}


def insert(client: httpx.Client, memories: list[dict[str, Any]], workspace: str = "ws") -> httpx.Response:
    body = {"workspace_id": workspace, "action": "insert", "memory_dicts": memories}
    return client.post("/vector_store", json=body)


def ids(client: httpx.Client, workspace: str = "ws") -> list[str]:
    response = client.get(f"/workspaces/{workspace}/memories", params={"limit": 500})
    if response.status_code == 404:  # the workspace was never written
        return []
    assert response.status_code == 200, response.text
    return sorted(m["memory_id"] for m in response.json()["memories"])


def refused(response: httpx.Response, index: int, limit: int) -> dict[str, Any]:
    assert response.status_code == 413, response.text
    body = response.json()
    assert body["success"] is False and body["answer"] == ""
    error: dict[str, Any] = body["metadata"]["error"]
    assert error["code"] == "payload_too_large"
    assert f"memory {index} of the write" in error["message"]
    assert f"at most {limit} bytes" in error["message"] and "max_memory_bytes" in error["message"]
    return error


def test_default_limit_matches_the_config_default() -> None:
    assert VectorStoreConfig().max_memory_bytes == DEFAULT_MAX_MEMORY_BYTES == 1 << 20


def test_a_memory_with_a_huge_metadata_is_refused_and_nothing_is_written(serve: ServeFn) -> None:
    huge = memory("big", metadata={f"k{i}": i for i in range(150_000)})  # ~1.9 MB of metadata
    with serve() as client:
        assert insert(client, [memory("before")]).status_code == 200
        response = insert(client, [memory("small"), huge])
        refused(response, 1, DEFAULT_MAX_MEMORY_BYTES)
        assert "'big'" in response.json()["metadata"]["error"]["message"]
        assert ids(client) == ["before"]  # neither memory of the refused write
        # a large memory under the limit is still fine (900 KB; a Chroma record indexes at most 2,000 values)
        fine = memory("fine", metadata={"notes": "x" * 900_000, **{f"k{i}": i for i in range(1_000)}})
        assert insert(client, [fine]).status_code == 200
        assert ids(client) == ["before", "fine"]


def test_at_the_limit_is_stored_one_byte_over_is_not(serve: ServeFn) -> None:
    with serve(SMALL) as client:
        assert insert(client, [sized("at", LIMIT)]).status_code == 200
        refused(insert(client, [sized("over", LIMIT + 1)]), 0, LIMIT)
        assert ids(client) == ["at"]
        # the stored memory reads back whole
        got = client.get("/workspaces/ws/memories/at").json()
        assert got["content"] == sized("at", LIMIT)["content"]


def test_patch_import_and_load_are_bounded(serve: ServeFn, tmp_path: Path) -> None:
    with serve(SMALL, f"file_roots={json.dumps([str(tmp_path)])}") as client:
        assert insert(client, [memory("a"), memory("b")]).status_code == 200

        patched = client.patch("/workspaces/ws/memories/a", json={"content": "y" * LIMIT})
        refused(patched, 0, LIMIT)
        assert client.get("/workspaces/ws/memories/a").json()["content"] == ""

        lines = [json.dumps(memory("c")), json.dumps(sized("d", LIMIT + 1))]
        imported = client.post("/workspaces/ws/import", content="\n".join(lines) + "\n")
        refused(imported, 1, LIMIT)
        assert ids(client) == ["a", "b"]  # the import replaced nothing

        library = tmp_path / "lib.jsonl"
        library.write_text("\n".join(lines) + "\n")
        loaded = client.post("/vector_store", json={"workspace_id": "ws", "action": "load", "path": str(library)})
        refused(loaded, 1, LIMIT)
        assert ids(client) == ["a", "b"]


def test_flows_that_build_memories_are_bounded(serve: ServeFn) -> None:
    call = {"tool_name": "web_search", "input": {"q": "x"}, "output": "z" * (LIMIT + 10), "success": True}
    with serve(SMALL) as client:
        response = client.post("/add_tool_call_result", json={"workspace_id": "ws", "tool_call_results": [call]})
        refused(response, 0, LIMIT)
        assert ids(client) == []
        fine = {**call, "output": "found it"}
        response = client.post("/add_tool_call_result", json={"workspace_id": "ws", "tool_call_results": [fine]})
        assert response.status_code == 200, response.text
        assert len(ids(client)) == 1


def test_null_lifts_the_limit(serve: ServeFn) -> None:
    with serve("vector_store.default.max_memory_bytes=null") as client:
        assert insert(client, [memory("big", metadata={"k": "v" * (2 << 20)})]).status_code == 200
        assert ids(client) == ["big"]
