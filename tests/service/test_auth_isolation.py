"""Randomised isolation: 10,000 requests with random keys (right, wrong, revoked, read-only, malformed, none) ×
random workspaces × every flow. Every workspace's memories and working-memory files carry its own marker; no
answer may show another workspace's marker, no workspace may end up holding another's, and every request's status
must be the one the key's workspaces and scope call for."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.app import ReMeApp
from reme_service.audit.log import read_records
from reme_service.auth.caller import ALL_WORKSPACES
from reme_service.auth.keyfile import create_key, revoke_key
from reme_service.server.http import create_http_app

pytestmark = [pytest.mark.service, pytest.mark.anyio, pytest.mark.own_backend]

REQUESTS = 10_000
WORKSPACES = ["alpha", "beta", "gamma"]
MARKER = re.compile(r"MARK([a-z]+)Z")
READ_FLOWS = {
    "retrieve_task_memory",
    "retrieve_task_memory_simple",
    "retrieve_personal_memory",
    "retrieve_tool_memory",
    "grep_working_memory",
    "read_working_memory",
    "use_mock_search",
    "react",
}


def marker(workspace: str) -> str:
    return f"MARK{workspace}Z"


def body_for(flow: str, workspace: str, rng: random.Random) -> dict[str, Any]:
    """A valid request of `flow` on `workspace`; whatever it writes carries the workspace's marker."""
    mark = marker(workspace)
    call = {"tool_name": "web_search", "input": {"q": mark}, "output": f"got {mark}", "token_cost": 5, "success": True}
    messages = [{"role": "user", "content": f"deploy the service {mark}"}, {"role": "assistant", "content": mark}]
    body: dict[str, Any] = {
        "workspace_id": workspace,
        "query": f"deploy {rng.randint(0, 9)}",
        "messages": messages,
        "trajectories": [{"messages": messages, "score": 1.0}],
        "tool_call_results": [call],
        "tool_names": "web_search",
        "memory_dicts": [],
        "update_utility": False,
        "freq_threshold": 1000,
        "utility_threshold": 0.0,
        "file_path": "notes.txt",
        "pattern": "MARK",
    }
    if flow == "vector_store":
        action = rng.choice(["list", "list", "insert", "insert", "delete_ids", "copy"])
        body["action"] = action
        body["memory_dicts"] = [{"when_to_use": f"deploying {mark}", "content": f"steps {mark} {rng.random()}"}]
        body["memory_ids"] = ["not-a-real-id"]
        if action == "copy":  # a request naming another workspace needs a key for both, whatever the action
            body["src_workspace_id"] = rng.choice(WORKSPACES)
    return body


def expected_status(key: dict[str, Any] | None, flow: str, body: dict[str, Any]) -> int:
    if key is None or not key["valid"]:
        return 401
    reads = flow in READ_FLOWS or (flow == "vector_store" and body["action"] == "list")
    if key["scope"] == "read" and not reads:
        return 403
    touched = [body["workspace_id"]]
    if flow == "vector_store" and body["action"] == "copy":
        touched.append(body["src_workspace_id"])
    allowed = key["workspaces"]
    if ALL_WORKSPACES not in allowed and any(w not in allowed for w in touched):
        return 403
    return 200


async def test_ten_thousand_random_requests_never_cross_a_workspace(tmp_path: Path) -> None:
    rng = random.Random(20261123)
    data = tmp_path / "data"
    keys_file = data / "auth" / "keys.json"
    keys: list[dict[str, Any]] = []
    for workspaces, scope in (
        (["alpha"], "write"),
        (["beta"], "write"),
        (["gamma"], "admin"),
        (["alpha", "beta"], "read"),
        (["beta", "gamma"], "write"),
        (["*"], "admin"),
    ):
        _, key = create_key(keys_file, workspaces=workspaces, scope=scope)  # type: ignore[arg-type]
        keys.append({"key": key, "workspaces": workspaces, "scope": scope, "valid": True})
    revoked, revoked_key = create_key(keys_file, workspaces=["alpha"], scope="write")
    revoke_key(keys_file, revoked.id)
    keys.append({"key": revoked_key, "workspaces": ["alpha"], "scope": "write", "valid": False})
    keys.append({"key": "rk_0123456789ab_" + "x" * 43, "workspaces": [], "scope": "admin", "valid": False})
    app = ReMeApp(f"data_dir={data}", "embedding_model.default.backend=hash", env={})
    statuses: Counter[int] = Counter()
    # which workspaces' markers each workspace may hold: its own, plus what an allowed copy brought in
    holds = {workspace: {workspace} for workspace in WORKSPACES}
    writes: set[str] = set()  # request ids of the write requests that reached the flows (all must be audited)
    reads: set[str] = set()
    async with app:
        api = create_http_app(app, manage_lifecycle=False)
        flows = sorted(app.flows)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://localhost") as client:
            star = {"Authorization": f"Bearer {keys[5]['key']}"}
            for workspace in WORKSPACES:  # a memory and a working-memory file of each workspace, to be found
                seed = body_for("vector_store", workspace, rng) | {"action": "insert"}
                assert (await client.post("/vector_store", json=seed, headers=star)).status_code == 200
                folder = data / "working_memory" / "workspaces" / workspace
                folder.mkdir(parents=True)
                (folder / "notes.txt").write_text(f"notes {marker(workspace)}\n", encoding="utf-8")
            # a file alpha's trusted tooling (no key) left in the shared root: no key may reach it
            (data / "working_memory" / "notes.txt").write_text(f"shared {marker('alpha')}\n", encoding="utf-8")
            for index in range(REQUESTS):
                flow = flows[index % len(flows)] if index < 4 * len(flows) else rng.choice(flows)
                workspace = rng.choice(WORKSPACES)
                caller = None if rng.random() < 0.05 else rng.choice(keys)
                headers = {"Authorization": f"Bearer {caller['key']}"} if caller else {}
                body = body_for(flow, workspace, rng)
                response = await client.post(f"/{flow}", json=body, headers=headers)
                want = expected_status(caller, flow, body)
                got = response.status_code
                if want == 200:  # allowed: it may still be a 4xx of its own (e.g. react without an LLM)
                    assert got not in (401, 403), (flow, body, response.text)
                else:
                    assert got == want, (flow, workspace, caller and caller["scope"], response.text)
                statuses[got] += 1
                if got != 401:
                    is_read = flow in READ_FLOWS or (flow == "vector_store" and body["action"] == "list")
                    (reads if is_read else writes).add(response.headers["x-request-id"])
                seen = set(MARKER.findall(response.text))
                assert seen <= holds[workspace], (flow, workspace, seen, response.text[:300])
                if flow == "vector_store" and body["action"] == "copy" and got == 200:
                    holds[workspace] |= holds[body["src_workspace_id"]]
        for workspace in WORKSPACES:  # nothing of one workspace landed in another but by an allowed copy
            listed = await client_list(api, workspace, star)
            assert set(MARKER.findall(listed)) <= holds[workspace], workspace
    assert statuses[200] > 2_000 and statuses[401] > 500 and statuses[403] > 2_000, statuses
    audited = {record.request_id for record in read_records(data / "audit")}
    assert writes <= audited, f"{len(writes - audited)} write requests left no audit record"
    assert not reads & audited, "a read request left an audit record"
    assert len(writes) > 2_000


async def client_list(api: Any, workspace: str, headers: dict[str, str]) -> str:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://localhost") as client:
        body = {"workspace_id": workspace, "action": "list"}
        response = await client.post("/vector_store", json=body, headers=headers)
        assert response.status_code == 200
        return response.text
