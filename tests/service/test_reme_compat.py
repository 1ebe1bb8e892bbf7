"""ReMe 0.2 clients unchanged: the request shapes ReMe's own client scripts, docs and cookbook agents send, answered
as those clients expect (issue #16; each deliberate difference that remains is in docs/compatibility.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.app import ReMeApp
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service


def post(client: httpx.Client, flow: str, body: dict[str, Any]) -> httpx.Response:
    return client.post(f"/{flow}", json=body)


def test_delete_ids_with_an_empty_list_is_a_success_that_does_nothing(serve: ServeFn) -> None:
    """AppWorld/BFCL agents send this after a run that stored nothing, then call raise_for_status()."""
    with serve() as client:
        inserted = post(client, "vector_store", {"workspace_id": "appworld_ws", "action": "insert",
                        "memory_dicts": [{"when_to_use": "w", "content": "c"}]})  # fmt: skip
        assert inserted.status_code == 200
        response = post(
            client, "vector_store", {"workspace_id": "appworld_ws", "action": "delete_ids", "memory_ids": []}
        )
        response.raise_for_status()
        assert response.json()["success"] is True
        assert response.json()["metadata"]["action_result"] == {"deleted_count": 0}
        listed = post(client, "vector_store", {"workspace_id": "appworld_ws", "action": "list"}).json()
        assert len(listed["metadata"]["action_result"]) == 1
        missing = post(client, "vector_store", {"workspace_id": "appworld_ws", "action": "delete_ids"})
        assert missing.status_code == 400 and "memory_ids" in missing.json()["metadata"]["error"]["message"]


@pytest.mark.parametrize("flow", ["retrieve_tool_memory", "summary_tool_memory"])
def test_a_tool_without_memory_answers_success_false_as_reme_does(serve: ServeFn, flow: str) -> None:
    with serve() as client:
        response = post(client, flow, {"workspace_id": "tool_ws", "tool_names": "unknown"})
        assert response.status_code == 200
        body = response.json()
        assert body["success"] is False and body["answer"] == "No matching tool memories found"
        assert body["metadata"]["error"]["code"] == "not_found"


def test_a_known_tool_still_answers_success(serve: ServeFn) -> None:
    call = {"tool_name": "web_search", "input": {"q": "x"}, "output": "ok", "token_cost": 5, "success": True}
    with serve() as client:
        assert post(client, "add_tool_call_result", {"workspace_id": "tool_ws", "tool_call_results": [call]}).json()[
            "success"
        ]
        body = post(client, "retrieve_tool_memory", {"workspace_id": "tool_ws", "tool_names": "web_search,unknown"})
        assert body.json()["success"] is True and body.json()["metadata"]["not_found"] == ["unknown"]


@pytest.mark.own_backend
def test_the_memory_backend_accepts_reme_store_dir(serve: ServeFn, tmp_path: Path) -> None:
    """ReMe's vector-store guide configures the memory backend with params.store_dir."""
    with serve("vector_store.default.backend=memory", f"vector_store.default.params.store_dir={tmp_path / 'x'}") as c:
        assert c.get("/health").json()["vector_store"]["default"]["status"] == "ok"


@pytest.mark.parametrize("flow", ["retrieve_task_memory", "retrieve_task_memory_simple", "retrieve_personal_memory"])
def test_an_empty_query_answers_an_empty_success_with_a_warning(serve: ServeFn, flow: str) -> None:
    with serve() as client:
        post(client, "vector_store", {"workspace_id": "ws", "action": "insert",
             "memory_dicts": [{"when_to_use": "w", "content": "c"}]})  # fmt: skip
        response = post(client, flow, {"workspace_id": "ws", "query": ""})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["success"] is True and body["answer"] == ""
        assert body["metadata"]["memory_list"] == [] and "empty" in body["metadata"]["warning"]


def test_record_task_memory_emits_deleted_memory_ids(serve: ServeFn) -> None:
    with serve() as client:
        stored = post(client, "vector_store", {"workspace_id": "ws_task", "action": "insert",
                      "memory_dicts": [{"when_to_use": "plan", "content": "milestones first"}]})  # fmt: skip
        memory_id = stored.json()["metadata"]["action_result"]["memory_ids"][0]
        memory = post(client, "vector_store", {"workspace_id": "ws_task", "action": "list"}).json()["metadata"][
            "action_result"
        ][0]
        assert memory["memory_id"] == memory_id
        body = post(client, "record_task_memory", {"workspace_id": "ws_task", "memory_dicts": [memory],
                    "update_utility": True}).json()  # fmt: skip
        assert body["success"] is True and body["metadata"]["deleted_memory_ids"] == []
        assert body["metadata"]["memory_list"][0]["metadata"]["freq"] == 1


@pytest.mark.own_backend
def test_a_qdrant_deployment_switches_by_configuration(serve: ServeFn, tmp_path: Path) -> None:
    memory = {"when_to_use": "when the API pages results", "content": "follow the next link"}
    with serve("vector_store.default.backend=qdrant", f"vector_store.default.params.path={tmp_path / 'q'}") as client:
        inserted = client.post(
            "/vector_store", json={"workspace_id": "ws", "action": "insert", "memory_dicts": [memory]}
        )
        assert inserted.status_code == 200, inserted.text
        found = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "pages results"}).json()
        assert found["metadata"]["memory_list"][0]["content"] == "follow the next link"
        assert client.get("/health").json()["vector_store"]["default"]["status"] == "ok"


def test_personal_conversations_with_empty_messages_are_summarised_and_searched(serve: ServeFn) -> None:
    """ReMe's Message defaults content to "": agents send their empty system prompt and blank user turns as they
    are. Those messages say nothing and are skipped; the rest of the conversation is kept (it was a 422)."""
    conversation = [
        {"role": "system", "content": ""},
        {"role": "user", "content": ""},
        {"role": "user", "content": "I moved to Berlin last month and I work as a nurse"},
        {"role": "assistant", "content": ""},
    ]
    with serve() as client:
        summary = post(
            client, "summary_personal_memory", {"workspace_id": "u", "trajectories": [{"messages": conversation}]}
        )
        assert summary.status_code == 200, summary.text
        stored = summary.json()["metadata"]["memory_list"]
        assert [m["content"] for m in stored] == ["I moved to Berlin last month and I work as a nurse"]
        only_messages = post(client, "summary_personal_memory", {"workspace_id": "u2", "messages": conversation})
        assert only_messages.status_code == 200, only_messages.text
        found = post(client, "retrieve_personal_memory", {"workspace_id": "u", "query": "Where in Berlin do I work?",
                     "messages": [{"role": "system", "content": ""}, {"role": "user", "content": ""}]})  # fmt: skip
        assert found.status_code == 200, found.text
        assert found.json()["metadata"]["memory_list"][0]["memory_id"] == stored[0]["memory_id"]
        asked = [{"role": "user", "content": "Which city did I move to, Berlin?"}, {"role": "user", "content": ""}]
        from_messages = post(client, "retrieve_personal_memory", {"workspace_id": "u", "messages": asked})
        assert from_messages.status_code == 200, from_messages.text
        assert from_messages.json()["metadata"]["memory_list"][0]["memory_id"] == stored[0]["memory_id"]


def test_for_as_store_dir_is_the_callers_folder_kept_as_sent(serve: ServeFn, tmp_path: Path) -> None:
    """summary_working_memory_for_as writes nothing: AgentScope writes metadata.write_file_dict on its own disk, so
    ReMe 0.2 returned `<store_dir>/<name>` for any store_dir, an absolute one too (it was a 403 here)."""
    big = "\n".join(f"row {i}: imported" for i in range(400))
    messages = [
        {"role": "user", "content": "import the file"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
        },  # fmt: skip
        {"role": "tool", "tool_call_id": "call_1", "content": big},
        {"role": "assistant", "content": "done"},
    ]
    knobs = {"working_summary_mode": "compact", "max_total_tokens": 100, "max_tool_message_tokens": 50}
    outside = tmp_path / "agent_side"
    with serve() as client:
        for store_dir, path in [
            (str(outside), f"{outside}/call_1.txt"),
            ("./wm/", "wm/call_1.txt"),
            ("", "call_1.txt"),
        ]:
            body = {"messages": messages, "keep_recent_count": 1, "store_dir": store_dir, **knobs}
            response = post(client, "summary_working_memory_for_as", body)
            assert response.status_code == 200, response.text
            result = response.json()
            assert result["metadata"]["write_file_dict"] == {path: big}
            assert f"path=`{path}`" in result["answer"][2]["content"]
        assert not outside.exists()
        assert list((tmp_path / "data").rglob("call_1.txt")) == []
        written = post(client, "summary_working_memory", {"messages": messages, "store_dir": str(outside), **knobs})
        assert written.status_code == 403 and not outside.exists()


def test_a_synchronous_with_block_shares_one_app_across_execute_calls(tmp_path: Path) -> None:
    """ReMe's ReMeApp is also a synchronous context manager: `with ReMeApp(...) as app: app.execute(...)`, the
    memory backend keeping what one call stored for the next (it was a TypeError here)."""
    trajectory = {"messages": [{"role": "user", "content": "How to plan a project?"},
                  {"role": "assistant", "content": "Break it into milestones first"}], "score": 1.0}  # fmt: skip
    app = ReMeApp(f"data_dir={tmp_path}", "embedding_model.default.backend=hash", "vector_store.default.backend=memory",
                  env={})  # fmt: skip
    with app:
        stored = app.execute(name="summary_task_memory_simple", workspace_id="ws", trajectories=[trajectory])
        assert stored["success"] is True, stored
        found = app.execute(name="retrieve_task_memory", workspace_id="ws", query="plan a project")
        assert [m["memory_id"] for m in found["metadata"]["memory_list"]] == [
            stored["metadata"]["memory_list"][0]["memory_id"]
        ]
    assert app.services is None  # stopped when the block ended
    again = app.execute(name="retrieve_task_memory", workspace_id="ws", query="plan a project")
    assert again["success"] is True and again["metadata"]["memory_list"] == []  # the memory store died with it


@pytest.mark.anyio
@pytest.mark.parametrize("flow", ["retrieve_task_memory", "retrieve_task_memory_simple"])
async def test_task_retrieval_from_messages_without_a_query(serve: ServeFn, tmp_path: Path, flow: str) -> None:
    """ReMe's Python mode (its AgentScope-runtime TaskMemoryService) retrieves with `messages` and no `query`: the
    query is built from the messages (it was a validation error). Neither field is still the 422 ReMe gives."""
    memory = {"when_to_use": "planning a software project", "content": "split it into milestones first"}
    asked = [{"role": "user", "content": "I have to plan a software project"}]
    async with ReMeApp(f"data_dir={tmp_path / 'py'}", "embedding_model.default.backend=hash", env={}) as app:
        await app.async_execute(name="vector_store", workspace_id="ws", action="insert", memory_dicts=[memory])
        result = await app.async_execute(name=flow, workspace_id="ws", messages=asked, top_k=1)
        assert result["success"] is True, result
        assert result["metadata"]["memory_list"][0]["content"] == memory["content"]
    with serve() as client:
        post(client, "vector_store", {"workspace_id": "ws", "action": "insert", "memory_dicts": [memory]})
        response = post(client, flow, {"workspace_id": "ws", "messages": asked, "top_k": 1})
        assert response.status_code == 200, response.text
        assert response.json()["metadata"]["memory_list"][0]["content"] == memory["content"]
        missing = post(client, flow, {"workspace_id": "ws", "messages": []})
        assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["body", "query"]
