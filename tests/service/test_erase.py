"""Verified erase: after `vector_store action=delete` answers, no file under data_dir holds any text of the
workspace's memories (snapshot, log, temp files, working-memory files), and the answer says what was purged."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.auth.keyfile import create_key
from tests.service.conftest import ServeFn

pytestmark = [pytest.mark.service, pytest.mark.own_backend]

MARKER = "zq-erase-marker-5e1d"


def occurrences(data_dir: Path, text: str) -> list[str]:
    """Every file under `data_dir` (hidden ones too, binary-safe) that contains `text`."""
    needle = text.encode()
    found = []
    for folder, _, files in os.walk(data_dir):
        for name in files:
            path = Path(folder) / name
            if needle in path.read_bytes():
                found.append(str(path.relative_to(data_dir)))
    return found


def post(client: httpx.Client, flow: str, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    response = client.post(f"/{flow}", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.mark.parametrize("backend", ["local", "memory"])
def test_a_deleted_workspace_leaves_no_text_behind(serve: ServeFn, tmp_path: Path, backend: str) -> None:
    data = tmp_path / "data"
    _, key = create_key(data / "auth" / "keys.json", workspaces=["doomed", "kept"], scope="write")
    headers = {"Authorization": f"Bearer {key}"}
    overrides = (f"vector_store.default.backend={backend}", "vector_store.default.params.compact_after_records=3")
    with serve(*(overrides if backend == "local" else overrides[:1])) as client:
        for i in range(8):  # enough writes for a snapshot, a log and a compaction in between
            memory = {
                "when_to_use": f"when {MARKER} {i}",
                "content": f"content {MARKER} {i}",
                "metadata": {"note": f"{MARKER}-{i}"},
            }
            post(client, "vector_store", headers, workspace_id="doomed", action="insert", memory_dicts=[memory])
        post(client, "vector_store", headers, workspace_id="kept", action="insert",
             memory_dicts=[{"when_to_use": "other", "content": "kept text"}])  # fmt: skip
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"remember {MARKER}"}]
        for i in range(4):
            call = {"id": f"c{i}", "function": {"name": "run", "arguments": "{}"}}
            messages += [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": f"{MARKER} output {i} " * 300},
            ]
        limits = {"max_tool_message_tokens": 50, "max_total_tokens": 500, "keep_recent_count": 1}
        post(client, "summary_working_memory", headers, workspace_id="doomed", messages=messages,
             working_summary_mode="compact", **limits)  # fmt: skip
        job_memory = {"when_to_use": f"job {MARKER}", "content": f"sent as a job {MARKER}"}
        job_body = {"workspace_id": "doomed", "action": "insert", "memory_dicts": [job_memory], "async": True}
        accepted = client.post("/vector_store", json=job_body, headers=headers)
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["job_id"]
        assert client.get(f"/jobs/{job_id}?wait=30", headers=headers).json()["status"] == "done"
        before = occurrences(data, MARKER)
        assert any(name.startswith("jobs/") for name in before), before
        if backend == "local":
            assert any(name.startswith("vector_store/") for name in before), before
        assert any(name.startswith("working_memory/") for name in before), before
        answer = post(client, "vector_store", headers, workspace_id="doomed", action="delete")
        result = answer["metadata"]["action_result"]
        assert result["deleted"] is True
        assert result["purged"]["memories"] == 9 and result["purged"]["working_memory_files"] >= 3
        assert result["purged"]["jobs"] == 1
        assert occurrences(data, MARKER) == []
        job = client.get(f"/jobs/{job_id}", headers=headers)
        assert job.status_code == 200 and MARKER not in job.text and "deleted" in job.json()["reason"]
        assert (
            "kept text"
            in client.post("/vector_store", json={"workspace_id": "kept", "action": "list"}, headers=headers).text
        )
