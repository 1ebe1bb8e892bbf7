"""Verified erase: after `vector_store action=delete` answers, no file under data_dir holds any text of the
workspace's memories (snapshot, log, temp files, working-memory files), nor, with PostgreSQL, any row of the store's
or the state's tables; and the answer says what was purged."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from reme_service.auth.keyfile import create_key
from reme_service.config.models import AppConfig
from reme_service.state.admin import key_admin
from tests.fakes.pg_server import pg_dsn  # noqa: F401 - fixture used by name
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


def rows_holding(dsn: str, prefix: str, text: str) -> list[str]:
    """`table.column` of every row, in the tables named `<prefix>...`, whose value holds `text` (bytea columns
    searched as bytes, every other column as its text)."""
    found = []
    with psycopg.connect(dsn) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND starts_with(table_name, %s)",
            (prefix,),
        ).fetchall()
        for table, column, kind in columns:
            quoted = f'"{column}"'
            holds = f"position(%s::bytea in {quoted}) > 0" if kind == "bytea" else f"strpos({quoted}::text, %s) > 0"
            query = f'SELECT count(*) FROM "{table}" WHERE {holds}'  # noqa: S608
            needle = text.encode() if kind == "bytea" else text
            row = conn.execute(query.encode(), (needle,)).fetchone()
            if row and row[0]:
                found.append(f"{table}.{column}")
    return found


def offload_messages() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"remember {MARKER}"}]
    for i in range(4):
        call = {"id": f"c{i}", "function": {"name": "run", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"{MARKER} output {i} " * 300},
        ]
    return messages


OFFLOAD_LIMITS = {"max_tool_message_tokens": 50, "max_total_tokens": 500, "keep_recent_count": 1}


def test_a_deleted_workspace_leaves_no_text_in_postgresql(serve: ServeFn, tmp_path: Path, pg_dsn: str) -> None:  # noqa: F811
    """With pgvector and the PostgreSQL state, the memories, the history, the job and the working-memory files of a
    deleted workspace leave no text in any table (nor in a file under data_dir)."""
    prefix = f"er{secrets.token_hex(4)}_"
    state = {"backend": "postgres", "dsn": pg_dsn, "table_prefix": f"{prefix}s_"}
    admin = key_admin(AppConfig(data_dir=str(tmp_path / "data"), state=state))  # type: ignore[arg-type]
    _, key = admin.create(workspaces=["doomed", "kept"], scope="write")
    admin.close()
    headers = {"Authorization": f"Bearer {key}"}
    overrides = ("vector_store.default.backend=pgvector", f"vector_store.default.params.dsn={pg_dsn}",
                 f"vector_store.default.params.table_prefix={prefix}", f"state.table_prefix={prefix}s_")  # fmt: skip
    with serve(*overrides) as client:
        for i in range(3):
            memory = {"when_to_use": f"when {MARKER} {i}", "content": f"content {MARKER} {i}"}
            post(client, "vector_store", headers, workspace_id="doomed", action="insert", memory_dicts=[memory])
        post(client, "vector_store", headers, workspace_id="kept", action="insert",
             memory_dicts=[{"when_to_use": "other", "content": "kept text"}])  # fmt: skip
        post(client, "summary_working_memory", headers, workspace_id="doomed", messages=offload_messages(),
             working_summary_mode="compact", **OFFLOAD_LIMITS)  # fmt: skip
        job_memory = {"when_to_use": f"job {MARKER}", "content": f"sent as a job {MARKER}"}
        job_body = {"workspace_id": "doomed", "action": "insert", "async": True, "memory_dicts": [job_memory]}
        job_id = client.post("/vector_store", json=job_body, headers=headers).json()["job_id"]
        assert client.get(f"/jobs/{job_id}?wait=30", headers=headers).json()["status"] == "done"
        before = rows_holding(pg_dsn, prefix, MARKER)
        assert f"{prefix}s_working_files.content" in before and f"{prefix}s_jobs.body" in before, before
        answer = post(client, "vector_store", headers, workspace_id="doomed", action="delete")
        purged = answer["metadata"]["action_result"]["purged"]
        assert purged["memories"] == 4 and purged["working_memory_files"] >= 3 and purged["jobs"] == 1, purged
        assert rows_holding(pg_dsn, prefix, MARKER) == []
        assert occurrences(tmp_path / "data", MARKER) == []
        listed = post(client, "vector_store", headers, workspace_id="kept", action="list")
        assert "kept text" in str(listed["metadata"]["action_result"])


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
        post(client, "summary_working_memory", headers, workspace_id="doomed", messages=offload_messages(),
             working_summary_mode="compact", **OFFLOAD_LIMITS)  # fmt: skip
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
