"""Task retrieval and the vector_store flow over real HTTP, including every bad input of the contract."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.testing.openai_server import FakeOpenAI
from tests.conftest import REPO_ROOT, shared_file
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

MEMORIES = [
    {
        "when_to_use": "update the user profile settings",
        "content": "open settings, then profile, then save",
        "score": 0.7,
    },
    {"when_to_use": "send an email to a contact", "content": "look the contact up first", "score": 0.5},
    {"when_to_use": "book a flight ticket", "content": "compare prices before booking", "score": 0.9},
]


def _insert(client: httpx.Client, workspace: str = "ws", memories: list[dict[str, Any]] | None = None) -> list[str]:
    r = client.post(
        "/vector_store", json={"workspace_id": workspace, "action": "insert", "memory_dicts": memories or MEMORIES}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is True
    return body["metadata"]["action_result"]["memory_ids"]


def test_retrieve_returns_stored_score_and_separate_relevance(serve: ServeFn) -> None:
    with serve() as client:
        _insert(client)
        r = client.post(
            "/retrieve_task_memory",
            json={"workspace_id": "ws", "query": "how do I update my profile settings?", "top_k": 2},
        )
        assert r.status_code == 200
        body = r.json()
        assert body["success"] is True
        memories = body["metadata"]["memory_list"]
        assert len(memories) == 2
        top = memories[0]
        assert top["when_to_use"] == "update the user profile settings"
        assert top["score"] == 0.7  # the stored score, not the similarity
        assert 0 < top["relevance"] <= 1
        assert memories[0]["relevance"] >= memories[1]["relevance"]
        assert body["answer"].startswith(
            "Memory 1 :\n When to use: update the user profile settings\n Content: open settings"
        )


def test_retrieve_simple_merges_into_one_text(serve: ServeFn) -> None:
    with serve() as client:
        _insert(client)
        r = client.post(
            "/retrieve_task_memory_simple", json={"workspace_id": "ws", "query": "book a flight", "top_k": 1}
        )
        body = r.json()
        assert body["success"] is True
        assert body["answer"].splitlines()[0] == "Previous Memory"
        assert "- book a flight ticket compare prices before booking" in body["answer"]


def test_missing_query_is_422(serve: ServeFn) -> None:
    with serve() as client:
        r = client.post("/retrieve_task_memory", json={"workspace_id": "ws"})
        assert r.status_code == 422
        assert r.json()["detail"][0]["loc"] == ["body", "query"]


def test_an_empty_query_is_an_empty_success_with_a_warning(serve: ServeFn) -> None:
    with serve() as client:
        r = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "  "})
        assert r.status_code == 200
        body = r.json()
        assert body["success"] is True and body["answer"] == "" and body["metadata"]["memory_list"] == []
        assert "query was empty" in body["metadata"]["warning"]


def test_a_query_past_the_limit_is_searched_by_its_start_and_the_answer_says_so(serve: ServeFn) -> None:
    """Every step after the query costs time per character (BM25, time rules, embedding), so a query is cut to
    MAX_QUERY_CHARS (ops/common/query_limit.py); its start still finds what it asks for."""
    from reme_service.ops.common.query_limit import MAX_QUERY_CHARS

    start = "how do I update my profile settings? "
    with serve() as client:
        _insert(client)
        for flow in ("retrieve_task_memory", "retrieve_personal_memory"):
            exact = client.post(f"/{flow}", json={"workspace_id": "ws", "query": start.ljust(MAX_QUERY_CHARS, "z")})
            assert exact.status_code == 200 and "warning" not in exact.json()["metadata"], flow
            long = client.post(f"/{flow}", json={"workspace_id": "ws", "query": start + "z" * 3_000_000})
            body = long.json()
            assert long.status_code == 200 and body["success"] is True, flow
            assert f"only its first {MAX_QUERY_CHARS} were searched" in body["metadata"]["warning"], flow
        found = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": start + "z" * 3_000_000})
        assert found.json()["metadata"]["memory_list"][0]["when_to_use"] == "update the user profile settings"


def test_top_k_out_of_range_is_422(serve: ServeFn) -> None:
    with serve() as client:
        assert client.post("/retrieve_task_memory", json={"query": "x", "top_k": 0}).status_code == 422
        assert client.post("/retrieve_task_memory", json={"query": "x", "top_k": 51}).status_code == 422


def test_unknown_workspace_is_an_empty_success(serve: ServeFn) -> None:
    with serve() as client:
        r = client.post("/retrieve_task_memory", json={"workspace_id": "never_written", "query": "anything"})
        assert r.status_code == 200
        assert r.json() == {"answer": "", "success": True, "metadata": {"memory_list": []}}


def test_bad_workspace_id_is_400(serve: ServeFn) -> None:
    with serve() as client:
        for bad in ("../x", "a/b", "a\\b", "..", "x" * 257, "tab\there"):
            r = client.post("/retrieve_task_memory", json={"workspace_id": bad, "query": "q"})
            assert r.status_code == 400, bad
            assert r.json()["metadata"]["error"]["code"] == "invalid_request"


def test_unknown_action_is_400(serve: ServeFn) -> None:
    with serve() as client:
        r = client.post("/vector_store", json={"workspace_id": "ws", "action": "explode"})
        assert r.status_code == 400
        body = r.json()
        assert body["success"] is False
        assert "valid actions: list, dump, load" in body["metadata"]["error"]["message"]


def test_action_missing_its_field_is_400(serve: ServeFn) -> None:
    with serve() as client:
        r = client.post("/vector_store", json={"workspace_id": "ws", "action": "copy"})
        assert r.status_code == 400
        assert "src_workspace_id" in r.json()["metadata"]["error"]["message"]


def test_unknown_flow_is_404_envelope(serve: ServeFn) -> None:
    with serve() as client:
        r = client.post("/no_such_flow", json={})
        assert r.status_code == 404
        assert r.json()["success"] is False
        assert "retrieve_task_memory" in r.json()["metadata"]["error"]["message"]


def test_paths_outside_the_roots_are_403(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        _insert(client)
        for action in ("dump", "load"):
            for path in ("/etc", str(tmp_path.parent), "../../"):
                r = client.post("/vector_store", json={"workspace_id": "ws", "action": action, "path": path})
                assert r.status_code == 403, (action, path)
                assert r.json()["metadata"]["error"]["code"] == "path_not_allowed"


def test_list_dump_load_copy_delete_round_trip(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        ids = _insert(client)
        listed = client.post("/vector_store", json={"workspace_id": "ws", "action": "list"}).json()
        result = listed["metadata"]["action_result"]
        assert isinstance(result, list) and {m["memory_id"] for m in result} == set(ids)

        r = client.post("/vector_store", json={"workspace_id": "ws", "action": "dump", "path": "dumps"})
        assert r.json()["metadata"]["action_result"]["size"] == 3
        assert (tmp_path / "data" / "libraries" / "dumps" / "ws.jsonl").read_text().count("\n") == 3

        r = client.post("/vector_store", json={"workspace_id": "ws2", "action": "load", "path": "dumps/ws.jsonl"})
        assert r.json()["metadata"]["action_result"] == {"size": 3}
        listed2 = client.post("/vector_store", json={"workspace_id": "ws2", "action": "list"}).json()
        assert {m["workspace_id"] for m in listed2["metadata"]["action_result"]} == {"ws2"}

        r = client.post("/vector_store", json={"workspace_id": "ws3", "action": "copy", "src_workspace_id": "ws"})
        assert r.json()["metadata"]["action_result"] == {"size": 3}

        r = client.post("/vector_store", json={"workspace_id": "ws3", "action": "delete_ids", "memory_ids": ids[:2]})
        assert r.json()["metadata"]["action_result"] == {"deleted_count": 2}
        r = client.post("/vector_store", json={"workspace_id": "ws3", "action": "list"})
        assert [m["memory_id"] for m in r.json()["metadata"]["action_result"]] == ids[2:]

        r = client.post("/vector_store", json={"workspace_id": "ws3", "action": "delete"})
        purged = {"memories": 1, "working_memory_files": 0, "jobs": 0}
        assert r.json()["metadata"]["action_result"] == {"deleted": True, "purged": purged}
        r = client.post("/vector_store", json={"workspace_id": "ws3", "action": "list"})
        assert r.json()["metadata"]["action_result"] == []


def test_load_missing_file_is_404(serve: ServeFn) -> None:
    with serve() as client:
        r = client.post("/vector_store", json={"workspace_id": "ws", "action": "load", "path": "nothing_here"})
        assert r.status_code == 404


def test_malformed_library_line_is_400_and_changes_nothing(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        ids = _insert(client)
        lib = tmp_path / "data" / "libraries" / "lib"
        lib.mkdir()
        (lib / "ws.jsonl").write_text('{"when_to_use": "a", "content": "b"}\n{not json\n')
        r = client.post("/vector_store", json={"workspace_id": "ws", "action": "load", "path": "lib"})
        assert r.status_code == 400
        assert "line 2" in r.json()["metadata"]["error"]["message"]
        (lib / "ws.jsonl").write_text('{"when_to_use": "a", "content": "b"}\n{"memory_type": "nonsense"}\n')
        r = client.post("/vector_store", json={"workspace_id": "ws", "action": "load", "path": "lib"})
        assert r.status_code == 400 and "line 2" in r.json()["metadata"]["error"]["message"]
        listed = client.post("/vector_store", json={"workspace_id": "ws", "action": "list"}).json()
        assert sorted(m["memory_id"] for m in listed["metadata"]["action_result"]) == sorted(ids)


def test_reme_appworld_library_loads_193_memories(serve: ServeFn, tmp_path: Path) -> None:
    source = shared_file("reme_library/appworld.jsonl")
    (tmp_path / "data" / "libraries").mkdir(parents=True)
    shutil.copy(source, tmp_path / "data" / "libraries" / "appworld.jsonl")
    with serve() as client:
        r = client.post("/vector_store", json={"workspace_id": "appworld", "action": "load", "path": "./"})
        assert r.status_code == 200, r.text
        assert r.json()["metadata"]["action_result"] == {"size": 193}
        r = client.post(
            "/retrieve_task_memory", json={"workspace_id": "appworld", "query": "How to update my profile?"}
        )
        assert len(r.json()["metadata"]["memory_list"]) == 3


def test_our_own_library_loads_and_answers(serve: ServeFn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT)
    with serve() as client:
        libraries = sorted((REPO_ROOT / "docs" / "library").glob("*.jsonl"))
        assert libraries, "docs/library has no memory library"
        name = libraries[0].stem
        r = client.post("/vector_store", json={"workspace_id": name, "action": "load", "path": "docs/library"})
        assert r.status_code == 200, r.text
        assert r.json()["metadata"]["action_result"]["size"] >= 20
        r = client.post(
            "/retrieve_task_memory", json={"workspace_id": name, "query": "the API returns results in pages"}
        )
        assert r.json()["metadata"]["memory_list"]


def test_embedding_provider_down_is_502_and_load_keeps_the_old_data(
    serve: ServeFn, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake, url = fake_openai, fake_openai.base_url
    overrides = (
        "embedding_model.default.backend=openai_compatible",
        f"embedding_model.default.base_url={url}",
        "embedding_model.default.params.dimensions=64",
        "embedding_model.default.params.max_retries=1",
        "embedding_model.default.params.backoff=0.01",
    )
    with serve(*overrides) as client:
        ids = _insert(client)
        (tmp_path / "data" / "libraries" / "ws.jsonl").write_text('{"when_to_use": "new", "content": "n"}\n')
        fake.fail_next(10, status=503, message="embedding backend overloaded", endpoint="embeddings")
        r = client.post("/vector_store", json={"workspace_id": "ws", "action": "load", "path": "./"})
        assert r.status_code == 502
        error = r.json()["metadata"]["error"]
        assert error["code"] == "embedding_error"
        assert "embedding backend overloaded" in error["message"]
        r = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "profile"})
        assert r.status_code == 502
        fake.reset()
        listed = client.post("/vector_store", json={"workspace_id": "ws", "action": "list"}).json()
        assert sorted(m["memory_id"] for m in listed["metadata"]["action_result"]) == sorted(ids)


def test_llm_rerank_and_rewrite_on_by_config(serve: ServeFn, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake, url = fake_openai, fake_openai.base_url
    overlay = tmp_path / "llm.yaml"
    overlay.write_text(
        "flow:\n  retrieve_task_memory:\n    flow_content: BuildQueryOp() >> RecallVectorStoreOp() >> "
        "RerankMemoryOp(top_k=2) >> RewriteMemoryOp()\n"
        "    input_schema:\n      query: {type: string, required: true}\n      top_k: {type: integer, default: 3}\n"
    )
    with serve(f"config={overlay}", "llm.default.model_name=fake-model", env={"FLOW_LLM_BASE_URL": url}) as client:
        _insert(client)
        fake.on_op("RerankMemoryOp", '```json\n{"ranked_indices": [2, 2, 0], "reasoning": "r"}\n```')
        fake.on_op("RewriteMemoryOp", '```json\n{"rewritten_context": "Do the profile thing."}\n```')
        r = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "update my profile settings"})
        body = r.json()
        assert r.status_code == 200, body
        assert body["answer"] == "Do the profile thing."
        memories = body["metadata"]["memory_list"]
        assert len(memories) == 2
        assert "no_llm_ops" not in body["metadata"]
        assert fake.ops == ["RerankMemoryOp", "RewriteMemoryOp"]
        prompts = [req["messages"][0]["content"] for req in fake.requests_to("chat")]
        assert any("update my profile settings" in p for p in prompts)


def test_llm_down_during_rerank_is_502(serve: ServeFn, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake, url = fake_openai, fake_openai.base_url
    overlay = tmp_path / "llm.yaml"
    overlay.write_text(
        "flow:\n  retrieve_task_memory:\n"
        "    flow_content: BuildQueryOp() >> RecallVectorStoreOp() >> RerankMemoryOp()\n"
    )
    with serve(f"config={overlay}", "llm.default.max_retries=1", env={"FLOW_LLM_BASE_URL": url}) as client:
        _insert(client)
        fake.fail_next(5, status=500, message="model crashed", endpoint="chat")
        r = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "profile"})
        assert r.status_code == 502
        assert "model crashed" in r.json()["metadata"]["error"]["message"]
        assert "RerankMemoryOp" in r.json()["metadata"]["error"]["message"]


def test_llm_steps_enabled_without_an_llm_say_so(serve: ServeFn, tmp_path: Path) -> None:
    overlay = tmp_path / "nollm.yaml"
    overlay.write_text(
        "flow:\n  retrieve_task_memory:\n    flow_content: BuildQueryOp() >> RecallVectorStoreOp() >> "
        "RerankMemoryOp() >> RewriteMemoryOp()\n"
    )
    with serve(f"config={overlay}") as client:
        _insert(client)
        body = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "profile"}).json()
        assert body["success"] is True
        assert body["metadata"]["no_llm_ops"] == ["RerankMemoryOp", "RewriteMemoryOp"]
        assert body["answer"].startswith("Memory 1 :")


def test_health_reports_components(serve: ServeFn) -> None:
    with serve() as client:
        body = client.get("/health").json()
        assert body["status"] == "healthy"
        assert body["vector_store"]["default"]["status"] == "ok"
        assert body["llm"]["default"]["backend"] == "none"
        assert "retrieve_task_memory" in body["flows"]


def test_openapi_declares_every_field(serve: ServeFn) -> None:
    with serve() as client:
        spec = client.get("/openapi.json").json()
        schema = spec["components"]["schemas"]["VectorStoreRequest"]
        assert {
            "workspace_id",
            "query",
            "messages",
            "metadata",
            "action",
            "path",
            "src_workspace_id",
            "memory_ids",
            "memory_dicts",
        } <= set(schema["properties"])
        assert schema["required"] == ["action"]
