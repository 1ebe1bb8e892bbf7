"""`reme state migrate`: a one-machine deployment's keys, audit trail, history, unfinished jobs and working-memory
files, copied from its files into PostgreSQL, where the nodes find them; run twice, it copies nothing twice."""

from __future__ import annotations

import asyncio
import secrets
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reme_service.audit.log import AuditLog
from reme_service.audit.record import AuditRecord
from reme_service.auth.caller import Caller
from reme_service.auth.keyfile import create_key
from reme_service.cli import main
from reme_service.config.models import AppConfig
from reme_service.errors import NotFoundError
from reme_service.history.entry import HistoryEntry
from reme_service.history.log import HistoryLog
from reme_service.jobs.files import JobFiles, key_digest
from reme_service.jobs.record import Job
from reme_service.ops.working.file_tools import read_file
from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.state.admin import audit_records
from reme_service.state.layer import StateLayer
from tests.fakes.pg_server import pg_dsn  # noqa: F401 - fixture used by name

WRITER = Caller(key_id="0123456789ab", name="w", scope="write", workspaces=("ws",))


def test_migrate_copies_keys_audit_history_and_open_jobs_once(
    tmp_path: Path,
    pg_dsn: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = tmp_path / "data"
    record, key = create_key(data / "auth" / "keys.json", workspaces=["ws"], scope="write", name="app")
    audit = AuditRecord(
        time=datetime.now(UTC), request_id="r1", workspace_id="ws", flow="vector_store", action="insert", status="ok"
    )
    AuditLog(data / "audit").append_sync(audit)
    HistoryLog(data / "history").write_sync("ws", [HistoryEntry(event="ADD", memory_id="m1", after={"a": 1})])
    jobs = JobFiles(data / "jobs")
    waiting = Job(job_id=f"job_{secrets.token_hex(16)}", flow="f", workspace_id="ws", request={}, caller=WRITER,
                  idempotency_key="once")  # fmt: skip
    finished = Job(job_id=f"job_{secrets.token_hex(16)}", flow="f", workspace_id="ws", request={}, caller=WRITER,
                   status="done")  # fmt: skip
    jobs.save(waiting)
    jobs.reserve_key(key_digest(WRITER.key_id, "once"), waiting.job_id)
    jobs.save(finished)
    working = data / "working_memory"
    (working / "workspaces" / "ws" / "s").mkdir(parents=True)
    (working / "workspaces" / "ws" / "s" / "c_0.json").write_text('["offloaded"]')
    (working / "root.txt").write_bytes(b"a line\n\xff undecodable\n")
    (working / ".root.txt.k2j3.tmp").write_text("half of an interrupted write")
    args = [f"data_dir={data}", f"state.dsn={pg_dsn}", f"state.table_prefix=t{secrets.token_hex(4)}_"]

    assert main(["state", "migrate", *args]) == 0
    assert "copied 1 keys, 1 audit records, 1 history entries and 1 unfinished jobs into PostgreSQL, and 2 " \
        "working-memory files" in capsys.readouterr().out  # fmt: skip
    assert main(["state", "migrate", *args]) == 0  # again: nothing twice
    assert "copied 0 keys, 0 audit records, 0 history entries and 0 unfinished jobs into PostgreSQL, and 0 " \
        "working-memory files" in capsys.readouterr().out  # fmt: skip

    config = AppConfig(data_dir=str(tmp_path / "elsewhere"), state={"backend": "postgres", "dsn": pg_dsn,  # type: ignore[arg-type]
                                                                  "table_prefix": args[2].split("=")[1]})  # fmt: skip
    layer = StateLayer.build(config, Path(config.data_dir))
    try:
        layer.keyring.load()
        assert layer.keyring.authenticate(key) == record.caller()
        assert [r.request_id for r in audit_records(config)] == ["r1"]
        assert layer.history is not None
        assert [e["event"] for e in asyncio.run(layer.history.read("ws", "m1"))] == ["ADD"]
        assert [job.job_id for job in layer.jobs.load_all()] == [waiting.job_id]
        assert layer.jobs.key_holder(key_digest(WRITER.key_id, "once")) == waiting.job_id
        keyed = layer.working.files(WorkspaceId("ws"))  # the workspace's folder, as a key's caller reaches it
        assert read_file(keyed, "s/c_0.json").text == '["offloaded"]'
        assert keyed.archive_indices("s", "c_", ".json") == {0}
        assert read_file(layer.working.files(None), "root.txt").text == "a line\n\ufffd undecodable"  # as on disk
        with pytest.raises(NotFoundError):
            read_file(layer.working.files(None), ".root.txt.k2j3.tmp")
    finally:
        asyncio.run(layer.stop())


def test_migrate_needs_a_postgresql(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["state", "migrate", f"data_dir={tmp_path}"]) == 2
    assert "no PostgreSQL to copy into" in capsys.readouterr().err
