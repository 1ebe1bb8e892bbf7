"""A long library load says how far it got: progress lines (bytes of the file, memories per second) and a total
on the logger `reme_service.library`."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest

from reme_service.ops.vector_store import library_io
from reme_service.testing.run_op import op_services, run_flow

pytestmark = pytest.mark.anyio

SIZE = 40


def write_library(path: Path, workspace_id: str) -> None:
    lines = [
        orjson.dumps(
            {
                "workspace_id": workspace_id,
                "memory_id": f"m{i:04d}",
                "memory_type": "task",
                "when_to_use": f"when the deploy number {i} fails",
                "content": f"restart worker {i} after refreshing the token",
            }
        )
        for i in range(SIZE)
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")


async def test_a_library_load_logs_progress_and_its_total(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(library_io, "PROGRESS_SECONDS", 0.0)  # every line counts as "a few seconds later"
    library = tmp_path / "libraries" / "lib.jsonl"  # the default writable library root of data_dir=tmp_path
    library.parent.mkdir()
    write_library(library, "lib")
    caplog.set_level(logging.INFO, logger="reme_service.library")
    async with op_services(tmp_path) as services:
        result = await run_flow(services, "vector_store", workspace_id="lib", action="load", path=str(library))
    assert result["metadata"]["action_result"] == {"size": SIZE}, result
    lines = [r.getMessage() for r in caplog.records if r.name == "reme_service.library"]
    progress = [line for line in lines if line.startswith("reading libraries/lib.jsonl: ")]  # as answers name it
    total = library.stat().st_size
    assert len(progress) >= SIZE - 1, lines
    assert f"/{total} bytes" in progress[-1] and "memories/s" in progress[-1]
    assert lines[-2].startswith(f"read libraries/lib.jsonl: {SIZE} memories in ")
    assert f"loaded {SIZE} memories into lib in " in lines[-1]  # the whole load: reading, embedding, storing
