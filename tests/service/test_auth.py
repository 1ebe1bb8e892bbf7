"""API keys over HTTP: 401 without a known key, 403 outside the key's workspaces or scope (for every flow, naming
neither the other workspace nor the key), 429 past the key's rate, revocation seen within 2 s, fail-closed
start-up (a corrupt key file, an exposed service without keys), and the open `/health`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.app import ReMeApp
from reme_service.auth.keyfile import create_key, revoke_key
from reme_service.client import ReMeClient
from reme_service.errors import ConfigError, UnauthorizedError
from tests.conditions import until
from tests.fakes.service_process import running_service
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

MEMORY = {"when_to_use": "when deploying", "content": "alice's deployment secret"}
CALL = {"tool_name": "web_search", "input": {"query": "x"}, "output": "ok", "token_cost": 10, "success": True}
#: a body every flow accepts (each takes the fields it declares and ignores the rest)
ANY_FLOW = {
    "query": "deployment",
    "action": "list",
    "messages": [{"role": "user", "content": "how do I deploy?"}],
    "trajectories": [{"messages": [{"role": "user", "content": "deploy"}], "score": 1.0}],
    "tool_call_results": [CALL],
    "tool_names": "web_search",
    "memory_dicts": [],
    "update_utility": False,
    "freq_threshold": 5,
    "utility_threshold": 0.5,
    "file_path": "notes.txt",
    "pattern": "deploy",
}


def wait_for(condition: Callable[[], bool]) -> None:
    asyncio.run(until(condition))


def keys_file(tmp_path: Path) -> Path:
    return tmp_path / "data" / "auth" / "keys.json"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def insert(workspace: str) -> dict[str, Any]:
    return {"workspace_id": workspace, "action": "insert", "memory_dicts": [MEMORY]}


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert body["success"] is False and body["answer"] == ""
    return dict(body["metadata"]["error"])


def test_requests_without_a_known_key_get_401(serve: ServeFn, tmp_path: Path) -> None:
    _, key = create_key(keys_file(tmp_path), workspaces=["alice"], scope="write")
    with serve() as client:
        for headers in (
            {},
            {"Authorization": "Basic YWxpY2U6cHc="},
            {"Authorization": "Bearer"},
            {"Authorization": "Bearer two words"},
            {"Authorization": "Bearer rk_000000000000_" + "A" * 43},
            {"X-API-Key": key[:-1] + ("B" if key[-1] != "B" else "C")},
            {"Authorization": f"Bearer {key}", "X-API-Key": "another"},
        ):
            response = client.post("/vector_store", json=insert("alice"), headers=headers)
            assert response.status_code == 401, headers
            assert error_of(response)["code"] == "unauthorized"
            assert response.headers["www-authenticate"].startswith("Bearer")
        assert client.post("/vector_store", json=insert("alice"), headers=bearer(key)).status_code == 200
        assert client.post("/vector_store", json=insert("alice"), headers={"X-API-Key": key}).status_code == 200


def test_a_key_reaches_only_its_own_workspaces_in_every_flow(serve: ServeFn, tmp_path: Path) -> None:
    _, alice = create_key(keys_file(tmp_path), workspaces=["alice"], scope="admin", name="alice-admin")
    _, bob = create_key(keys_file(tmp_path), workspaces=["bob"], scope="write", name="bob")
    with serve() as client:
        assert client.post("/vector_store", json=insert("alice"), headers=bearer(alice)).json()["success"]
        flows = sorted(client.get("/health").json()["flows"])
        assert len(flows) > 15
        for flow in flows:
            body = {**ANY_FLOW, "workspace_id": "alice"}
            response = client.post(f"/{flow}", json=body, headers=bearer(bob))
            assert response.status_code == 403, (flow, response.text)
            error = error_of(response)
            assert error["code"] == "forbidden"
            assert "alice" not in response.text and "bob" not in response.text and bob not in response.text
        copy = {"workspace_id": "bob", "action": "copy", "src_workspace_id": "alice"}
        response = client.post("/vector_store", json=copy, headers=bearer(bob))
        assert response.status_code == 403 and "alice" not in response.text
        listed = client.post("/vector_store", json={"workspace_id": "bob", "action": "list"}, headers=bearer(bob))
        assert listed.status_code == 200 and "secret" not in listed.text


def test_a_key_dumps_and_loads_only_its_own_workspaces_library_files(serve: ServeFn, tmp_path: Path) -> None:
    """Library roots are shared folders, so a key works in its workspace's own folder of them: bob naming alice's
    dump neither loads it (404, as if it did not exist) nor overwrites it, and alice still loads what she dumped."""
    _, alice = create_key(keys_file(tmp_path), workspaces=["alice"], scope="write", name="alice")
    _, bob = create_key(keys_file(tmp_path), workspaces=["bob"], scope="write", name="bob")

    def act(key: str, workspace: str, action: str, **fields: Any) -> httpx.Response:
        return client.post(
            "/vector_store", json={"workspace_id": workspace, "action": action, **fields}, headers=bearer(key)
        )

    with serve() as client:
        assert act(alice, "alice", "insert", memory_dicts=[MEMORY]).status_code == 200
        dumped = act(alice, "alice", "dump", path="libraries/alice.jsonl")
        assert dumped.json()["metadata"]["action_result"] == {"size": 1, "path": "libraries/alice.jsonl"}
        for path in ("libraries/alice.jsonl", "alice.jsonl", "libraries", "libraries/../alice.jsonl"):
            loaded = act(bob, "bob", "load", path=path)
            assert loaded.status_code in (403, 404), (path, loaded.text)
            assert "secret" not in act(bob, "bob", "list").text
        other = {"when_to_use": "when planting", "content": "bob's planted text"}
        assert act(bob, "bob", "insert", memory_dicts=[other]).status_code == 200
        assert act(bob, "bob", "dump", path="libraries/alice.jsonl").status_code == 200  # into bob's own folder
        assert act(bob, "bob", "load", path="libraries/alice.jsonl").json()["metadata"]["action_result"] == {"size": 1}
        assert act(alice, "alice", "delete").status_code == 200
        assert act(alice, "alice", "load", path="libraries/alice.jsonl").status_code == 200
        listed = act(alice, "alice", "list").text
        assert "secret" in listed and "planted" not in listed
    libraries = tmp_path / "data" / "libraries" / "workspaces"
    assert sorted(p.relative_to(libraries).as_posix() for p in libraries.rglob("*.jsonl")) == [
        "alice/alice.jsonl",
        "bob/alice.jsonl",
    ]


def test_a_key_of_every_workspace_sees_the_whole_library_root(serve: ServeFn, tmp_path: Path) -> None:
    """An operator's key (`*`) may read and write every workspace anyway: it loads a library put in the root for all
    and dumps where a trusted caller would, while a key of one workspace does not see that file."""
    _, admin = create_key(keys_file(tmp_path), workspaces=["*"], scope="admin", name="ops")
    _, bob = create_key(keys_file(tmp_path), workspaces=["bob"], scope="write", name="bob")
    shared = tmp_path / "data" / "libraries" / "team.jsonl"
    shared.parent.mkdir(parents=True)
    shared.write_text('{"when_to_use": "when onboarding", "content": "read the team runbook"}\n')
    with serve() as client:

        def act(key: str, workspace: str, action: str, **fields: Any) -> httpx.Response:
            body = {"workspace_id": workspace, "action": action, **fields}
            return client.post("/vector_store", json=body, headers=bearer(key))

        assert act(admin, "bob", "load", path="libraries/team.jsonl").json()["metadata"]["action_result"] == {"size": 1}
        assert act(bob, "bob", "load", path="libraries/team.jsonl").status_code == 404
        assert act(admin, "bob", "dump", path="exports").status_code == 200
    assert (tmp_path / "data" / "libraries" / "exports" / "bob.jsonl").is_file()


def test_a_read_key_may_read_but_not_write(serve: ServeFn, tmp_path: Path) -> None:
    _, writer = create_key(keys_file(tmp_path), workspaces=["alice"], scope="write")
    _, reader = create_key(keys_file(tmp_path), workspaces=["alice"], scope="read")
    with serve() as client:
        assert client.post("/vector_store", json=insert("alice"), headers=bearer(writer)).status_code == 200
        listed = client.post("/vector_store", json={"workspace_id": "alice", "action": "list"}, headers=bearer(reader))
        assert listed.status_code == 200 and "deployment secret" in listed.text
        found = client.post(
            "/retrieve_task_memory", json={"workspace_id": "alice", "query": "deploying"}, headers=bearer(reader)
        )
        assert found.status_code == 200 and "deployment secret" in found.json()["answer"]
        for flow, body in (
            ("vector_store", insert("alice")),
            ("vector_store", {"workspace_id": "alice", "action": "delete"}),
            ("vector_store", {"workspace_id": "alice", "action": "delete_ids", "memory_ids": ["x"]}),
            ("add_tool_call_result", {"workspace_id": "alice", "tool_call_results": [CALL]}),
            ("summary_working_memory", {"workspace_id": "alice", "messages": [{"role": "user", "content": "hi"}]}),
        ):
            response = client.post(f"/{flow}", json=body, headers=bearer(reader))
            assert response.status_code == 403, (flow, response.text)
            assert "read-only" in error_of(response)["message"]
        still = client.post("/vector_store", json={"workspace_id": "alice", "action": "list"}, headers=bearer(reader))
        assert len(still.json()["metadata"]["action_result"]) == 1


#: `auth.reload_seconds`' default, with room for the file system's timestamp granularity
RELOAD_SECONDS = 1.0 + 0.05


def test_a_revoked_key_gets_401_within_the_reload_interval(serve: ServeFn, tmp_path: Path) -> None:
    """The key file is looked at every `auth.reload_seconds` (1 s): a request checked later than that after the
    revocation is refused. Said without a time budget: a request SENT more than the interval after the revocation
    is checked later still, so no such request may get a 200 (however slow the machine)."""
    record, key = create_key(keys_file(tmp_path), workspaces=["alice"], scope="write")
    with serve() as client:
        assert client.post("/vector_store", json=insert("alice"), headers=bearer(key)).status_code == 200
        revoke_key(keys_file(tmp_path), record.id)
        revoked_at = time.monotonic()
        late_answers: list[float] = []

        def refused() -> bool:
            sent = time.monotonic() - revoked_at
            status = client.post("/vector_store", json=insert("alice"), headers=bearer(key)).status_code
            if status == 200 and sent > RELOAD_SECONDS:
                late_answers.append(sent)
            return status == 401

        wait_for(refused)
        assert late_answers == [], f"the revoked key was accepted {late_answers} s after the revocation"
        response = client.post("/vector_store", json=insert("alice"), headers=bearer(key))
        assert "revoked" in error_of(response)["message"]
        assert client.post("/vector_store", json=insert("alice")).status_code == 401  # no key: still closed
        _, fresh = create_key(keys_file(tmp_path), workspaces=["alice"], scope="write")  # and a new one works
        wait_for(lambda: client.post("/vector_store", json=insert("alice"), headers=bearer(fresh)).status_code == 200)


def test_without_keys_a_loopback_service_is_open_and_the_first_key_closes_it(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        assert client.post("/vector_store", json=insert("alice"), headers={}).status_code == 200
        _, key = create_key(keys_file(tmp_path), workspaces=["alice"], scope="write")
        wait_for(lambda: client.post("/vector_store", json=insert("alice")).status_code == 401)
        assert client.post("/vector_store", json=insert("alice"), headers=bearer(key)).status_code == 200


def test_auth_mode_off_serves_everyone_and_required_refuses_a_start_without_keys(
    serve: ServeFn, tmp_path: Path
) -> None:
    create_key(keys_file(tmp_path), workspaces=["alice"], scope="write")
    with serve("auth.mode=off") as client:
        assert client.post("/vector_store", json=insert("bob")).status_code == 200
    with pytest.raises(ConfigError, match="auth.mode=required"):
        ReMeApp(f"data_dir={tmp_path / 'empty'}", "auth.mode=required", env={})


def test_a_key_over_its_rate_gets_429_with_retry_after(serve: ServeFn, tmp_path: Path) -> None:
    _, key = create_key(keys_file(tmp_path), workspaces=["alice"], scope="write")
    _, other = create_key(keys_file(tmp_path), workspaces=["alice"], scope="write")
    # one token per 100 s: none comes back while the case runs, however slow the machine
    limits = ("auth.rate_limit.requests_per_second=0.01", "auth.rate_limit.burst=3")
    with serve(*limits) as client:
        body = {"workspace_id": "alice", "action": "list"}
        statuses = [client.post("/vector_store", json=body, headers=bearer(key)).status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        limited = client.post("/vector_store", json=body, headers=bearer(key))
        assert error_of(limited)["code"] == "rate_limited" and int(limited.headers["retry-after"]) >= 1
        assert client.post("/vector_store", json=body, headers=bearer(other)).status_code == 200  # per key


def test_health_and_docs_stay_open_and_say_nothing_private(serve: ServeFn, tmp_path: Path) -> None:
    create_key(keys_file(tmp_path), workspaces=["alice"], scope="write", name="alice-ci")
    with serve() as client:
        health = client.get("/health")
        assert health.status_code == 200
        assert "alice" not in health.text
        assert client.get("/openapi.json").status_code == 200


def _reme(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reme_service", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_a_corrupt_key_file_or_an_exposed_service_without_keys_refuses_to_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "auth").mkdir(parents=True)
    (data / "auth" / "keys.json").write_text('{"version": 1, "keys": [', encoding="utf-8")
    corrupt = _reme(f"data_dir={data}", "http.port=0", cwd=tmp_path)
    assert corrupt.returncode == 2
    assert "key file" in corrupt.stderr and "not valid JSON" in corrupt.stderr and "serving" not in corrupt.stderr
    exposed = _reme(f"data_dir={tmp_path / 'fresh'}", "http.host=0.0.0.0", "http.port=0", cwd=tmp_path)
    assert exposed.returncode == 2
    assert "reme keys create" in exposed.stderr and "auth.mode=off" in exposed.stderr


def test_reme_keys_create_list_revoke(tmp_path: Path) -> None:
    data = f"data_dir={tmp_path / 'data'}"
    created = _reme("keys", "create", "--workspace", "alice", "--workspace", "bob", "--scope", "write",
                    "--name", "ci", data, cwd=tmp_path)  # fmt: skip
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("rk_")
    stored = keys_file(tmp_path).read_text(encoding="utf-8")
    secret = key[len("rk_") + 12 + 1 :]  # the secret may itself hold '_'
    assert key not in stored and secret not in stored  # only the hash is kept
    key_id = key.split("_")[1]
    listed = _reme("keys", "list", data, cwd=tmp_path)
    assert listed.returncode == 0 and key_id in listed.stdout and "alice,bob" in listed.stdout
    assert "active" in listed.stdout and key not in listed.stdout
    star = _reme("keys", "create", "--workspace", "*", "--scope", "write", data, cwd=tmp_path)
    assert star.returncode == 2 and "only for --scope admin" in star.stderr
    revoked = _reme("keys", "revoke", key_id, data, cwd=tmp_path)
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    assert "revoked" in _reme("keys", "list", data, cwd=tmp_path).stdout
    assert _reme("keys", "revoke", "ffffffffffff", data, cwd=tmp_path).returncode == 2


def test_the_python_client_sends_its_key(serve: ServeFn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, key = create_key(keys_file(tmp_path), workspaces=["alice"], scope="write")
    with serve() as client:
        base_url = str(client.base_url)
        with ReMeClient(base_url, workspace_id="alice", api_key=key) as keyed:
            assert keyed.call("vector_store", action="list").success
        monkeypatch.setenv("REME_API_KEY", key)
        with ReMeClient(base_url, workspace_id="alice") as from_env:
            assert from_env.call("vector_store", action="list").success
        monkeypatch.delenv("REME_API_KEY")
        with ReMeClient(base_url, workspace_id="alice") as anonymous, pytest.raises(UnauthorizedError):
            anonymous.call("vector_store", action="list")


def test_the_readme_walk_through_as_a_new_user(tmp_path: Path) -> None:
    """README "Securing the service": create a key with the CLI, start a service that requires keys (here with
    auth.mode=required on loopback rather than on every interface), call it with and without the key, revoke it."""
    data = f"data_dir={tmp_path / 'data'}"
    created = _reme("keys", "create", "--workspace", "alice", "--scope", "write", "--name", "alice-agent", data,
                    cwd=tmp_path)  # fmt: skip
    key = created.stdout.strip().splitlines()[-1]
    with running_service(tmp_path, data, "auth.mode=required", "embedding_model.default.backend=hash") as base_url:
        query = {"workspace_id": "alice", "query": "paging"}
        ok = httpx.post(f"{base_url}/retrieve_task_memory", json=query, headers=bearer(key), timeout=30)
        assert ok.status_code == 200 and ok.json()["success"] is True
        other = httpx.post(f"{base_url}/retrieve_task_memory", json={**query, "workspace_id": "bob"},
                           headers=bearer(key), timeout=30)  # fmt: skip
        assert other.status_code == 403
        assert httpx.post(f"{base_url}/retrieve_task_memory", json=query, timeout=30).status_code == 401
        listed = _reme("keys", "list", data, cwd=tmp_path)
        key_id = key.split("_")[1]
        assert key_id in listed.stdout and "alice-agent" in listed.stdout
        assert _reme("keys", "revoke", key_id, data, cwd=tmp_path).returncode == 0
        wait_for(
            lambda: httpx.post(f"{base_url}/retrieve_task_memory", json=query, headers=bearer(key)).status_code == 401
        )


def test_auth_keys_file_shares_one_key_file(serve: ServeFn, tmp_path: Path) -> None:
    shared = tmp_path / "shared" / "keys.json"
    _, key = create_key(shared, workspaces=["alice"], scope="write")
    with serve(f"auth.keys_file={shared}") as client:
        assert client.post("/vector_store", json=insert("alice"), headers=bearer(key)).status_code == 200
        assert client.post("/vector_store", json=insert("alice")).status_code == 401
    listed = _reme("keys", "list", f"auth.keys_file={shared}", cwd=tmp_path)
    assert key.split("_")[1] in listed.stdout
