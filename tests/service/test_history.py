"""The history of every memory (`history/`): entries written by the stores' audited seam for the flows, the
management API and the `vector_store` action; read through `GET .../history` and `vector_store action=history`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.auth.keyfile import create_key
from tests.contract.test_local_store import FsyncRecorder, contents_synced, name_synced
from tests.service.conftest import ServeFn
from tests.service.test_audit import app_for, memory
from tests.service.test_erase import occurrences

pytestmark = pytest.mark.service

SECRET = "zq-history-text-7a1c"


def post(client: httpx.Client, flow: str, headers: dict[str, str] | None = None, **body: Any) -> dict[str, Any]:
    response = client.post(f"/{flow}", json=body, headers=headers or {})
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()
    assert payload["success"] is True, payload
    return payload


def history(client: httpx.Client, workspace: str, memory_id: str, **kw: Any) -> httpx.Response:
    return client.get(f"/workspaces/{workspace}/memories/{memory_id}/history", **kw)


def test_add_update_delete_are_recorded_oldest_first_with_request_and_key(serve: ServeFn, tmp_path: Path) -> None:
    record, key = create_key(tmp_path / "data" / "auth" / "keys.json", workspaces=["ws"], scope="write")
    auth = {"Authorization": f"Bearer {key}"}
    with serve() as client:
        memory = {"memory_id": "m1", "when_to_use": "when deploying", "content": f"run the checks {SECRET}"}
        post(client, "vector_store", {**auth, "x-request-id": "req-add"}, workspace_id="ws", action="insert",
             memory_dicts=[memory])  # fmt: skip
        patched = client.patch("/workspaces/ws/memories/m1", json={"content": "run the tests"},
                               headers={**auth, "x-request-id": "req-patch"})  # fmt: skip
        assert patched.status_code == 200, patched.text
        answer = history(client, "ws", "m1", headers=auth)
        assert answer.status_code == 200, answer.text
        entries = answer.json()
        assert [e["event"] for e in entries] == ["ADD", "UPDATE"]
        add, update = entries
        assert add["request_id"] == "req-add" and add["key_id"] == record.id and add["flow"] == "vector_store"
        assert add["after"]["content"] == f"run the checks {SECRET}" and add["before"] is None
        assert update["request_id"] == "req-patch" and update["flow"] == "manage"
        assert update["before"]["content"] == f"run the checks {SECRET}"
        assert update["after"]["content"] == "run the tests"
        assert "when_to_use" not in update["after"]  # only the changed fields
        assert add["time"] <= update["time"]

        # the vector_store action gives the same list
        action = post(client, "vector_store", auth, workspace_id="ws", action="history", memory_id="m1")
        assert action["metadata"]["action_result"] == entries

        deleted = client.delete("/workspaces/ws/memories/m1", headers={**auth, "x-request-id": "req-del"})
        assert deleted.status_code == 200, deleted.text
        entries = history(client, "ws", "m1", headers=auth).json()
        assert [e["event"] for e in entries] == ["ADD", "UPDATE", "DELETE"]
        assert entries[-1]["request_id"] == "req-del"
        assert all(e["before"] is None and e["after"] is None for e in entries)  # ids and times only
        assert [e["time"] for e in entries] == sorted(e["time"] for e in entries)
        assert occurrences(tmp_path / "data" / "history", SECRET) == []
        assert occurrences(tmp_path / "data" / "history", "run the tests") == []


def test_unknown_memory_is_404_and_scope_is_checked(serve: ServeFn, tmp_path: Path) -> None:
    keys = tmp_path / "data" / "auth" / "keys.json"
    _, reader = create_key(keys, workspaces=["ws"], scope="read")
    _, writer = create_key(keys, workspaces=["ws"], scope="write")
    _, other = create_key(keys, workspaces=["elsewhere"], scope="admin")
    with serve() as client:
        post(client, "vector_store", {"Authorization": f"Bearer {writer}"}, workspace_id="ws", action="insert",
             memory_dicts=[{"memory_id": "m1", "when_to_use": "w", "content": "c"}])  # fmt: skip
        read = {"Authorization": f"Bearer {reader}"}
        assert history(client, "ws", "m1", headers=read).status_code == 200
        missing = history(client, "ws", "nope", headers=read)
        assert missing.status_code == 404 and missing.json()["metadata"]["error"]["code"] == "not_found"
        assert history(client, "ws", "m1", headers={"Authorization": f"Bearer {other}"}).status_code == 403
        assert history(client, "ws", "m1").status_code == 401
        action = client.post("/vector_store", json={"workspace_id": "ws", "action": "history"}, headers=read)
        assert action.status_code == 400 and "memory_id" in action.text
        action = client.post("/vector_store", json={"workspace_id": "ws", "action": "history", "memory_id": "x"},
                             headers=read)  # fmt: skip
        assert action.status_code == 404


def test_flows_write_history_and_a_workspace_delete_scrubs_it(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        post(client, "summary_personal_memory", workspace_id="p", user_name="alice",
             messages=[{"role": "user", "content": f"I am vegetarian and I collect {SECRET} stamps.",
                        "time_created": "2026-11-02 18:30:00"}])  # fmt: skip
        listed = post(client, "vector_store", workspace_id="p", action="list")["metadata"]["action_result"]
        (memory_id,) = [m["memory_id"] for m in listed]
        entries = history(client, "p", memory_id).json()
        assert [e["event"] for e in entries] == ["ADD"] and entries[0]["flow"] == "summary_personal_memory"
        assert SECRET in entries[0]["after"]["content"]
        assert occurrences(tmp_path / "data" / "history", SECRET)
        post(client, "vector_store", workspace_id="p", action="delete")
        assert occurrences(tmp_path / "data", SECRET) == []
        # a workspace that is gone keeps the ids and times of its memories' history
        post(client, "vector_store", workspace_id="p", action="insert",
             memory_dicts=[{"memory_id": "fresh", "when_to_use": "w", "content": "c"}])  # fmt: skip
        assert [e["event"] for e in history(client, "p", memory_id).json()] == ["ADD", "DELETE"]


def test_a_load_replaces_history_text_and_adds_the_new_memories(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        post(client, "vector_store", workspace_id="lib", action="insert",
             memory_dicts=[{"memory_id": "old", "when_to_use": "w", "content": f"old {SECRET}"}])  # fmt: skip
        body = '{"memory_id": "new", "when_to_use": "w2", "content": "new text"}\n'
        response = client.post("/workspaces/lib/import", content=body)
        assert response.status_code == 200, response.text
        assert [e["event"] for e in history(client, "lib", "old").json()] == ["ADD", "DELETE"]
        assert [e["event"] for e in history(client, "lib", "new").json()] == ["ADD"]
        assert occurrences(tmp_path / "data" / "history", SECRET) == []


def test_history_can_be_turned_off(serve: ServeFn, tmp_path: Path) -> None:
    with serve("history.enabled=false") as client:
        post(client, "vector_store", workspace_id="ws", action="insert",
             memory_dicts=[{"memory_id": "m1", "when_to_use": "w", "content": "c"}])  # fmt: skip
        assert history(client, "ws", "m1").json() == []
        assert history(client, "ws", "m2").status_code == 404
        assert not (tmp_path / "data" / "history").exists()


def test_a_malformed_as_of_is_a_422_naming_the_field(serve: ServeFn) -> None:
    with serve() as client:
        body = {"workspace_id": "p", "query": "where do I work?", "as_of": "last tuesday-ish"}
        response = client.post("/retrieve_personal_memory", json=body)
        assert response.status_code == 422, response.text
        (problem,) = response.json()["detail"]
        assert problem["loc"][-1] == "as_of" and "2023-05-08" in problem["msg"]
        schema = client.get("/openapi.json").json()["components"]["schemas"]
        retrieve = next(v for k, v in schema.items() if k == "RetrievePersonalMemoryRequest")
        assert {"as_of", "include_invalid"} <= set(retrieve["properties"])


@pytest.mark.anyio
async def test_entries_are_on_disk_before_the_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fsync = FsyncRecorder(os.fsync)
    monkeypatch.setattr(os, "fsync", fsync)
    async with app_for(tmp_path) as app:
        path = tmp_path / "data" / "history" / "ws.jsonl"
        for text in ("first", "second"):  # the first creates the file (its name must be synced too)
            insert = app.async_execute("vector_store", workspace_id="ws", action="insert", memory_dicts=[memory(text)])
            synced = await fsync.during(insert)
            assert contents_synced(synced, path), text
            if text == "first":
                assert name_synced(synced, path)
        delete = app.async_execute("vector_store", workspace_id="ws", action="delete")
        synced = await fsync.during(delete)  # the scrubbing rewrite is an atomic, synced replace
        assert contents_synced(synced, path) and name_synced(synced, path)


def test_an_id_repeated_in_one_write_is_one_entry_of_what_was_stored(serve: ServeFn) -> None:
    """A batch naming an id twice stores its last version (`stores/vectors.latest_by_id`); its history says so once,
    from the version before the batch, not once per repeat from the same `before`."""
    with serve() as client:
        first = {"memory_id": "m1", "when_to_use": "when deploying", "content": "c1"}
        post(client, "vector_store", workspace_id="ws", action="insert", memory_dicts=[first])
        post(client, "vector_store", workspace_id="ws", action="insert",
             memory_dicts=[{**first, "content": "A"}, {**first, "content": "B"}])  # fmt: skip
        post(client, "vector_store", workspace_id="ws", action="delete_ids", memory_ids=["m1", "m1"])
        imported = client.post("/workspaces/ws/import", content=b'{"memory_id": "m2"}\n{"memory_id": "m2"}\n')
        assert imported.status_code == 200 and imported.json() == {"size": 1}, imported.text

        entries = history(client, "ws", "m1").json()
        assert [e["event"] for e in entries] == ["ADD", "UPDATE", "DELETE"]
        assert [e["event"] for e in history(client, "ws", "m2").json()] == ["ADD"]
