"""The `reme` command (start-up validation, real serving) and the Python API (same dicts as HTTP)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from reme_service import ReMeApp, __version__
from tests.fakes.service_process import running_service
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service


def _run_cli(
    *args: str, cwd: Path, timeout: float = 60, module: str = "reme_service"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if not k.startswith("FLOW_")},
        check=False,
    )


def test_bad_flow_refuses_to_start_and_says_why(tmp_path: Path) -> None:
    result = _run_cli("flow.broken.flow_content=BuildQueryOp() >> NoSuchOp()", cwd=tmp_path)
    assert result.returncode == 2
    assert "flow 'broken'" in result.stderr and "unknown op 'NoSuchOp'" in result.stderr
    assert "BuildQueryOp" in result.stderr  # the valid names are listed


def test_a_flow_that_does_not_declare_what_its_ops_read_refuses_to_start(tmp_path: Path) -> None:
    result = _run_cli("flow.my_search.flow_content=BuildQueryOp() >> RecallVectorStoreOp()", cwd=tmp_path)
    assert result.returncode == 2
    assert "flow 'my_search': op RecallVectorStoreOp reads request field 'top_k'" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_config_key_refuses_to_start(tmp_path: Path) -> None:
    result = _run_cli("http.prot=1", cwd=tmp_path)
    assert result.returncode == 2
    assert "unknown config key 'http.prot'" in result.stderr


def test_bad_store_parameters_refuse_to_start_and_say_why(tmp_path: Path) -> None:
    result = _run_cli("vector_store.default.backend=chroma", "vector_store.default.params.lock_ttl=0", cwd=tmp_path)
    assert result.returncode == 2
    assert "vector store backend 'chroma': lock_ttl: Input should be greater than 0" in result.stderr
    result = _run_cli(
        "vector_store.default.backend=chroma", "vector_store.default.params.shared_lock=true", cwd=tmp_path
    )
    assert result.returncode == 2 and "shared_lock needs a Chroma server (host)" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_and_version(tmp_path: Path) -> None:
    result = _run_cli("--help", cwd=tmp_path)
    assert result.returncode == 0 and "usage: reme" in result.stdout
    assert "reme keys create" in result.stdout and "reme audit" in result.stdout  # the subcommands are listed
    for module in ("reme_service", "reme_service.cli"):  # the entry point's own module runs it too
        version = _run_cli("--version", cwd=tmp_path, module=module)
        assert version.returncode == 0 and version.stdout.strip() == f"reme-service {__version__}", module


def test_a_taken_port_or_a_bad_log_level_is_one_line_before_serving(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run_cli(f"http.port={port}", "embedding_model.default.backend=hash", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"reme: cannot listen on 127.0.0.1:{port}: Address already in use; stop the other service or choose "
        "another http.port"
    ]
    level = _run_cli("log_level=verbose", cwd=tmp_path)
    assert level.returncode == 2 and len(level.stderr.strip().splitlines()) == 1
    assert "log_level 'verbose' is not one of critical, error, warning, info, debug, trace" in level.stderr


def test_cli_serves_http_until_terminated(tmp_path: Path) -> None:
    with running_service(tmp_path, "embedding_model.default.backend=hash") as base_url:
        r = httpx.get(f"{base_url}/health", timeout=5)
        assert r.json()["status"] == "healthy"
        r = httpx.post(
            f"{base_url}/vector_store",
            json={"workspace_id": "w", "action": "insert", "memory_dicts": [{"when_to_use": "a", "content": "b"}]},
        )
        assert r.json()["success"] is True
        assert (tmp_path / "reme_data" / "vector_store").is_dir()  # the local store's default place


@pytest.mark.anyio
async def test_python_api_returns_the_same_dict_as_http(serve: ServeFn, tmp_path: Path) -> None:
    memories = [{"memory_id": "m1", "when_to_use": "plan a trip", "content": "book early", "score": 0.4}]
    async with ReMeApp(f"data_dir={tmp_path / 'py'}", "embedding_model.default.backend=hash", env={}) as app:
        inserted = await app.async_execute(
            name="vector_store", workspace_id="w", action="insert", memory_dicts=memories
        )
        assert inserted["success"] is True
        result = await app.async_execute(name="retrieve_task_memory", workspace_id="w", query="plan a trip")
        missing = await app.async_execute(name="retrieve_task_memory", workspace_id="w")
        empty = await app.async_execute(name="retrieve_task_memory", workspace_id="w", query="")
        unknown = await app.async_execute(name="nope")
    with serve() as client:
        client.post("/vector_store", json={"workspace_id": "w", "action": "insert", "memory_dicts": memories})
        http_result = client.post("/retrieve_task_memory", json={"workspace_id": "w", "query": "plan a trip"}).json()
    for body in (result, http_result):
        for memory in body["metadata"]["memory_list"]:
            memory.pop("time_created")
            memory.pop("time_modified")
    assert result == http_result
    assert missing["success"] is False and missing["metadata"]["error"]["code"] == "validation_error"
    assert empty["success"] is True and "warning" in empty["metadata"]  # as ReMe 0.2: empty, not an error
    assert unknown["metadata"]["error"]["code"] == "not_found"


def test_a_store_that_cannot_start_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """The local store belongs to one process: a second service on the same data directory says so in one line."""
    data = f"data_dir={tmp_path / 'shared'}"
    with running_service(tmp_path, data, "embedding_model.default.backend=hash"):
        second = _run_cli(data, "http.port=0", "embedding_model.default.backend=hash", cwd=tmp_path)
    assert second.returncode == 2
    last = second.stderr.strip().splitlines()[-1]
    assert last.startswith("reme: cannot start: ") and "Traceback" not in second.stderr
