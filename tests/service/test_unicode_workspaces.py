"""Workspace ids as ReMe accepted them — e-mail addresses, Chinese names, spaces, ids differing only in case — work in
every flow and survive a restart; '/', '\\' and control characters are a 400 naming the field."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

IDS = ["alice@example.com", "张三", "John Smith", "Alice", "alice"]


def insert(client: httpx.Client, workspace: str) -> None:
    memory = {"when_to_use": f"when {workspace} deploys", "content": f"the deploy notes of {workspace}"}
    response = client.post(
        "/vector_store", json={"workspace_id": workspace, "action": "insert", "memory_dicts": [memory]}
    )
    assert response.status_code == 200, response.text


def listed(client: httpx.Client, workspace: str) -> list[str]:
    response = client.post("/vector_store", json={"workspace_id": workspace, "action": "list"})
    assert response.status_code == 200, response.text
    return [memory["content"] for memory in response.json()["metadata"]["action_result"]]


def test_reme_style_ids_work_and_stay_apart(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        for workspace in IDS:
            insert(client, workspace)
        for workspace in IDS:
            assert listed(client, workspace) == [f"the deploy notes of {workspace}"], workspace
            found = client.post("/retrieve_task_memory", json={"workspace_id": workspace, "query": "deploy notes"})
            assert found.json()["metadata"]["memory_list"][0]["workspace_id"] == workspace
        tool = {"tool_name": "search", "input": {"q": "x"}, "output": "ok", "token_cost": 3, "success": True}
        added = client.post("/add_tool_call_result", json={"workspace_id": "张三", "tool_call_results": [tool]})
        assert added.json()["success"] is True
        copied = client.post("/vector_store", json={"workspace_id": "John Smith", "action": "copy",
                                                    "src_workspace_id": "alice@example.com"})  # fmt: skip
        assert copied.json()["metadata"]["action_result"] == {"size": 1}
        deleted = client.post("/vector_store", json={"workspace_id": "Alice", "action": "delete"})
        assert deleted.json()["metadata"]["action_result"]["deleted"] is True
        assert listed(client, "Alice") == [] and listed(client, "alice") == ["the deploy notes of alice"]
    with serve() as client:  # a restart reads them back from their encoded file names
        assert "the deploy notes of 张三" in listed(client, "张三")
        assert sorted(listed(client, "John Smith")) == [
            "the deploy notes of John Smith",
            "the deploy notes of alice@example.com",
        ]


@pytest.mark.parametrize("bad", ["a/b", "a\\b", "tab\tid", "x" * 257])
def test_ids_no_store_can_hold_are_400(serve: ServeFn, bad: str) -> None:
    with serve() as client:
        response = client.post("/vector_store", json={"workspace_id": bad, "action": "list"})
        assert response.status_code in (400, 422)
        assert "workspace_id" in response.text


def test_a_workspace_whose_library_name_passes_255_bytes_dumps_and_loads(serve: ServeFn, tmp_path: Path) -> None:
    """90 × "工" is 270 bytes, its `<id>.jsonl` past the file-name limit: dump and load still work (the name is cut
    and hashed, the same for both), and no answer names a server path (D20)."""
    workspace, other = "工" * 90, "工" * 89 + "人"  # the same cut prefix, told apart by the hash
    with serve() as client:
        for ws in (workspace, other):
            insert(client, ws)
            dumped = client.post("/vector_store", json={"workspace_id": ws, "action": "dump", "path": "libraries"})
            assert dumped.status_code == 200, dumped.text
            assert str(tmp_path) not in dumped.text
        for ws in (workspace, other):
            client.post("/vector_store", json={"workspace_id": ws, "action": "delete"})
            loaded = client.post("/vector_store", json={"workspace_id": ws, "action": "load", "path": "libraries"})
            assert loaded.status_code == 200 and str(tmp_path) not in loaded.text, loaded.text
            assert listed(client, ws) == [f"the deploy notes of {ws}"]
        named = {"workspace_id": workspace, "action": "dump", "path": f"libraries/{workspace}.jsonl"}
        too_long = client.post("/vector_store", json=named)  # a name the client chose: refused, no server path
        assert too_long.status_code == 422 and str(tmp_path) not in too_long.text, too_long.text
