"""The audit log: one line per request that changes memories or files (or tries to), with who, what and how it
ended, durable before the answer; reads leave none; concurrent writers never tear lines; `reme audit` prints it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reme_service.app import ReMeApp
from reme_service.audit.log import read_records
from reme_service.audit.record import AuditRecord
from reme_service.auth.caller import current_caller
from reme_service.auth.keyfile import create_key
from tests.contract.test_local_store import FsyncRecorder, contents_synced, name_synced
from tests.service.conftest import ServeFn

pytestmark = [pytest.mark.service, pytest.mark.anyio, pytest.mark.own_backend]

CALL = {"tool_name": "web_search", "input": {"q": "x"}, "output": "ok", "token_cost": 5, "success": True}


def app_for(tmp_path: Path, *overrides: str) -> ReMeApp:
    return ReMeApp(f"data_dir={tmp_path / 'data'}", "embedding_model.default.backend=hash", *overrides, env={})


def records(tmp_path: Path) -> list[AuditRecord]:
    return list(read_records(tmp_path / "data" / "audit"))


def memory(text: str, memory_id: str | None = None) -> dict[str, Any]:
    return {"when_to_use": f"when {text}", "content": text, **({"memory_id": memory_id} if memory_id else {})}


async def test_each_change_is_one_line_with_its_ids_and_reads_leave_none(tmp_path: Path) -> None:
    library = tmp_path / "data" / "libraries"
    library.mkdir(parents=True)
    (library / "lib.jsonl").write_text(
        "\n".join(
            json.dumps({"workspace_id": "lib", "memory_id": f"m{i:031d}", **memory(f"loaded {i}")}) for i in range(3)
        )
        + "\n",
        encoding="utf-8",
    )
    async with app_for(tmp_path, f"file_roots={json.dumps([str(library)])}") as app:
        run = app.async_execute
        first = await run("vector_store", workspace_id="a", action="insert", memory_dicts=[memory("one")])
        mid = first["metadata"]["action_result"]["memory_ids"][0]
        await run("vector_store", workspace_id="a", action="insert", memory_dicts=[memory("one again", mid)])
        for read in (
            run("vector_store", workspace_id="a", action="list"),
            run("retrieve_task_memory", workspace_id="a", query="one"),
            run("retrieve_tool_memory", workspace_id="a", tool_names="web_search"),
        ):
            await read
        assert len(records(tmp_path)) == 2  # the reads wrote nothing
        await run("vector_store", workspace_id="b", action="copy", src_workspace_id="a")
        await run("vector_store", workspace_id="a", action="delete_ids", memory_ids=[mid, "never-existed"])
        await run("vector_store", workspace_id="lib", action="load", path=str(library / "lib.jsonl"))
        await run("vector_store", workspace_id="b", action="delete")
        await run("add_tool_call_result", workspace_id="t", tool_call_results=[CALL])
        await run("vector_store", workspace_id="a", action="no_such_action")
    got = records(tmp_path)
    assert [(r.flow, r.action, r.workspace_id, r.status) for r in got] == [
        ("vector_store", "insert", "a", "ok"),
        ("vector_store", "insert", "a", "ok"),
        ("vector_store", "copy", "b", "ok"),
        ("vector_store", "delete_ids", "a", "ok"),
        ("vector_store", "load", "lib", "ok"),
        ("vector_store", "delete", "b", "ok"),
        ("add_tool_call_result", "add_tool_call_result", "t", "ok"),
        ("vector_store", "no_such_action", "a", "error"),
    ]
    insert, update, copy, delete_ids, load, delete, tool, failed = got
    assert insert.ids_added == [mid] and not insert.ids_changed
    assert update.ids_changed == [mid] and not update.ids_added
    assert copy.ids_added == [mid] and copy.extra == {"src_workspace_id": "a"}
    assert delete_ids.ids_deleted == [mid] and delete_ids.counts["deleted"] == 1
    assert load.counts["added"] == 3 and len(load.ids_added) == 3
    assert delete.counts["workspace_dropped"] == 1
    assert tool.counts["added"] == 1
    assert failed.error_code == "invalid_request" and failed.counts["added"] == 0
    assert len({r.request_id for r in got}) == len(got) and all(r.key_id is None for r in got)


async def test_working_memory_writes_are_audited_with_relative_paths(tmp_path: Path) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for i in range(6):
        call = {"id": f"c{i}", "function": {"name": "run", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"output line {i} " * 400},
        ]
    async with app_for(tmp_path) as app:
        answer = await app.async_execute(
            "summary_working_memory", workspace_id="w", messages=messages, working_summary_mode="compact",
            max_tool_message_tokens=50,
            max_total_tokens=1000, keep_recent_count=1,
        )  # fmt: skip
        assert answer["success"], answer
    (record,) = records(tmp_path)
    assert record.flow == "summary_working_memory" and record.counts["files"] >= 5
    assert all(not os.path.isabs(path) and str(tmp_path) not in path for path in record.files_written)


async def test_the_key_is_recorded_by_id_and_name_never_the_key(tmp_path: Path) -> None:
    record, key = create_key(tmp_path / "data" / "auth" / "keys.json", workspaces=["a"], scope="write", name="ci")
    async with app_for(tmp_path) as app:
        token = current_caller.set(record.caller())
        try:
            await app.async_execute("vector_store", workspace_id="a", action="insert", memory_dicts=[memory("x")])
            refused = await app.async_execute("vector_store", workspace_id="b", action="delete")
        finally:
            current_caller.reset(token)
    assert refused["metadata"]["error"]["code"] == "forbidden"
    written, denied = records(tmp_path)
    assert (written.key_id, written.key_name, written.status) == (record.id, "ci", "ok")
    assert (denied.workspace_id, denied.status, denied.error_code) == ("b", "error", "forbidden")
    assert key not in (tmp_path / "data" / "audit").joinpath(f"{written.time:%Y-%m-%d}.jsonl").read_text()


async def test_two_hundred_concurrent_changes_give_two_hundred_whole_lines(tmp_path: Path) -> None:
    async with app_for(tmp_path) as app:
        answers = await asyncio.gather(
            *(
                app.async_execute(
                    "vector_store",
                    workspace_id=f"w{i % 7}",
                    action="insert",
                    memory_dicts=[memory(f"memory {i} " + "x" * 3000)],
                )  # fmt: skip
                for i in range(200)
            )
        )
    assert all(answer["success"] for answer in answers)
    got = records(tmp_path)  # every line parses: none interleaved or torn
    assert len(got) == 200
    assert sorted(r.ids_added[0] for r in got) == sorted(
        a["metadata"]["action_result"]["memory_ids"][0] for a in answers
    )


async def test_the_line_is_on_disk_before_the_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fsync = FsyncRecorder(os.fsync)
    monkeypatch.setattr(os, "fsync", fsync)
    async with app_for(tmp_path) as app:
        for text in ("first", "second"):  # the first creates the day's file (its name must be synced too)
            synced = await fsync.during(
                app.async_execute("vector_store", workspace_id="a", action="insert", memory_dicts=[memory(text)])
            )
            (path,) = (tmp_path / "data" / "audit").glob("*.jsonl")
            assert contents_synced(synced, path), text
            if text == "first":
                assert name_synced(synced, path)


def test_reme_audit_prints_and_filters(tmp_path: Path) -> None:
    async def write() -> None:
        async with app_for(tmp_path) as app:
            for workspace in ("a", "b", "a"):
                await app.async_execute(
                    "vector_store", workspace_id=workspace, action="insert", memory_dicts=[memory("m")]
                )

    asyncio.run(write())
    data = f"data_dir={tmp_path / 'data'}"

    def audit(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "reme_service", "audit", *args, data]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path)

    table = audit("--workspace", "a")
    assert table.returncode == 0 and len(table.stdout.splitlines()) == 2 and "vector_store/insert" in table.stdout
    as_json = audit("--json")
    assert [json.loads(line)["workspace_id"] for line in as_json.stdout.splitlines()] == ["a", "b", "a"]
    assert audit("--since", "2999-01-01").stdout == ""
    assert len(audit("--until", "2999-01-01T00:00").stdout.splitlines()) == 3
    bad = audit("--since", "yesterday")
    assert bad.returncode == 2 and "ISO date" in bad.stderr


@pytest.mark.parametrize(
    "body",
    [
        {"workspace_id": "b", "action": "insert", "memory_dicts": [memory("x")], "async": True},
        {"workspace_id": "b", "action": "reembed"},  # always a job (`job_when`)
    ],
)
def test_a_write_refused_as_a_job_is_audited(serve: ServeFn, tmp_path: Path, body: dict[str, Any]) -> None:
    """A job submission refused with 403 leaves its audit line, as the same write sent directly does (D21)."""
    data = tmp_path / "data"
    _, key = create_key(data / "auth" / "keys.json", workspaces=["a"], scope="write")
    with serve() as client:
        refused = client.post("/vector_store", json=body, headers={"Authorization": f"Bearer {key}"})
        assert refused.status_code == 403, refused.text
    (line,) = read_records(data / "audit")
    assert (line.workspace_id, line.status, line.error_code, line.action) == ("b", "error", "forbidden", body["action"])
