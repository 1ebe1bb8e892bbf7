"""The Node cookbook's tests and the curl cookbook, run against a live server (as CI does).

`node --test cookbook/node/` (over the TypeScript client of clients/typescript, built here first) and
`cookbook/curl/run_all.sh` talk to a real service started here; each test is skipped, saying why, when node
(>= 20.3) and npm, or curl/bash are not installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reme_service.auth.keyfile import create_key
from tests.clients.typescript import built_client
from tests.conftest import REPO_ROOT
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service


def _overrides(tmp_path: Path) -> tuple[str, ...]:
    return ()  # the default roots: library.sh reads docs/library (shipped, read-only) and dumps to data_dir


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the Node client tests need Node.js >= 18")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    major = int(re.match(r"v(\d+)", version).group(1))  # type: ignore[union-attr]
    if major < 18:
        pytest.skip(f"node {version} is too old: the Node client needs global fetch (Node >= 18)")
    return node


def _run(args: list[str], base_url: str, timeout: float = 300, api_key: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REME_BASE_URL": base_url, "REME_API_KEY": api_key}
    return subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _admin_key(tmp_path: Path, keyed: bool) -> str:
    """With `keyed`, a key for every workspace, created before the service starts: the service then requires one,
    and the clients must send what REME_API_KEY holds."""
    if not keyed:
        return ""
    return create_key(tmp_path / "data" / "auth" / "keys.json", workspaces=["*"], scope="admin")[1]


@pytest.mark.parametrize("keyed", [False, True], ids=["open", "with-api-key"])
def test_node_client_tests_pass_against_a_live_server(serve: ServeFn, tmp_path: Path, keyed: bool) -> None:
    node = _node()
    key = _admin_key(tmp_path, keyed)
    with built_client(), serve(*_overrides(tmp_path)) as client:  # the cookbook imports clients/typescript/dist
        result = _run([node, "--test", "cookbook/node/"], str(client.base_url).rstrip("/"), api_key=key)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert re.search(r"^# pass [1-9]", output, re.M), output
    assert re.search(r"^# fail 0$", output, re.M) and re.search(r"^# skipped 0$", output, re.M), output


@pytest.mark.parametrize("keyed", [False, True], ids=["open", "with-api-key"])
def test_curl_cookbook_runs_against_a_live_server(serve: ServeFn, tmp_path: Path, keyed: bool) -> None:
    bash, curl = shutil.which("bash"), shutil.which("curl")
    if bash is None or curl is None:
        pytest.skip("the curl cookbook needs bash and curl")
    if shutil.which("jq") is None and shutil.which("python3") is None:
        pytest.skip("the curl cookbook needs jq or python3 to read responses")
    key = _admin_key(tmp_path, keyed)
    with serve(*_overrides(tmp_path)) as client:
        result = _run([bash, "cookbook/curl/run_all.sh", str(client.base_url).rstrip("/")], "", api_key=key)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "curl cookbook: 5 passed, 0 failed, 0 skipped" in output, output
    # open, or with a key of every workspace, the dump is in the library root itself
    dumps = tmp_path / "data" / "libraries" / "reme_library_dumps"
    assert list(dumps.glob("curl_library_*_copy.jsonl")), "the dump was written"


def test_curl_runner_fails_when_a_request_fails(serve: ServeFn, tmp_path: Path) -> None:
    if shutil.which("bash") is None or shutil.which("curl") is None:
        pytest.skip("the curl cookbook needs bash and curl")
    # with only tmp_path as a root there is no docs/library, so library.sh's load fails (404): the runner must fail
    with serve(f'file_roots=["{tmp_path}"]') as client:
        result = _run(["bash", "cookbook/curl/run_all.sh", str(client.base_url).rstrip("/")], "")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "failed: library" in output and "HTTP 404" in output
