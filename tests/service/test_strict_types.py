"""Strict request types (issue 37, D22): a scalar field takes its JSON type only, as ReMe's clients send it, so a
coercion that used to hide a client bug (`"top_k": "5"`, `"limit": 5.0`, `"ttl": "60"`) is a 422 naming the field;
the shapes ReMe's own clients send (an integer for a number, `tool_names` as a string or a list, numeric strings in
the fields an LLM fills for the working-memory file tools) keep working."""

from __future__ import annotations

from typing import Any

import pytest

from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("/retrieve_task_memory", {"workspace_id": "ws", "query": "q", "top_k": "5"}, "top_k"),
    ("/retrieve_task_memory", {"workspace_id": "ws", "query": "q", "top_k": 5.0}, "top_k"),
    ("/retrieve_task_memory", {"workspace_id": "ws", "query": 12}, "query"),
    ("/retrieve_personal_memory", {"workspace_id": "ws", "query": "q", "top_k": "3"}, "top_k"),
    ("/vector_store", {"workspace_id": 12, "action": "list"}, "workspace_id"),
    ("/vector_store", {"workspace_id": "ws", "action": "list", "limit": "5"}, "limit"),
    ("/vector_store", {"workspace_id": "ws", "action": "list", "offset": 1.0}, "offset"),
    ("/vector_store", {"workspace_id": "ws", "action": "delete_ids", "memory_ids": "m1"}, "memory_ids"),
    ("/vector_store", {"workspace_id": "ws", "action": "delete_ids", "memory_ids": [1]}, "memory_ids"),
    ("/delete_task_memory", {"workspace_id": "ws", "utility_threshold": "0.5"}, "utility_threshold"),
    ("/delete_task_memory", {"workspace_id": "ws", "freq_threshold": "5"}, "freq_threshold"),
    ("/summary_personal_memory", {"workspace_id": "ws", "messages": [], "ttl": "60"}, "ttl"),
    ("/retrieve_tool_memory", {"workspace_id": "ws", "tool_names": 7}, "tool_names"),
]

ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("/vector_store", {"workspace_id": "ws", "action": "list", "limit": 5, "offset": 0}),
    ("/delete_task_memory", {"workspace_id": "ws", "utility_threshold": 1, "freq_threshold": 5}),
    ("/delete_task_memory", {"workspace_id": "ws", "utility_threshold": 0.5, "freq_threshold": 2}),
    ("/retrieve_tool_memory", {"workspace_id": "ws", "tool_names": "web_search,calc"}),
    ("/retrieve_tool_memory", {"workspace_id": "ws", "tool_names": ["web_search", "calc"]}),
]


@pytest.mark.parametrize(("path", "body", "field"), REFUSED, ids=[f"{p}:{f}:{b[f]!r}" for p, b, f in REFUSED])
def test_lax_coercions_are_refused(serve: ServeFn, path: str, body: dict[str, Any], field: str) -> None:
    with serve() as client:
        answer = client.post(path, json=body)
        assert answer.status_code == 422, answer.text
        locations = [error["loc"] for error in answer.json()["detail"]]
        assert any(field in location for location in locations), answer.text


@pytest.mark.parametrize(("path", "body"), ACCEPTED, ids=[f"{p}:{sorted(b)}" for p, b in ACCEPTED])
def test_reme_shapes_are_accepted(serve: ServeFn, path: str, body: dict[str, Any]) -> None:
    with serve() as client:
        answer = client.post(path, json=body)
        assert answer.status_code == 200, answer.text


def test_llm_filled_file_tool_numbers_keep_coercion(serve: ServeFn) -> None:
    """`read_working_memory` / `grep_working_memory` are called by LLMs in tool calls: `"offset": "1"` is 1, as in
    ReMe (`int(offset)`); a non-number is still refused."""
    with serve() as client:
        lines = "\n".join(f"line {i}" for i in range(5))
        written = client.post(
            "/summary_working_memory",
            json={"messages": [{"role": "user", "content": lines}], "store_dir": "", "chat_id": "c"},
        )
        assert written.status_code == 200, written.text
        read = client.post("/read_working_memory", json={"file_path": "missing.txt", "offset": "1", "limit": 2.0})
        assert read.status_code != 422, read.text
        refused = client.post("/read_working_memory", json={"file_path": "missing.txt", "offset": "one"})
        assert refused.status_code == 422 and "offset" in refused.text, refused.text
