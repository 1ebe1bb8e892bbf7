"""Background jobs over HTTP (#21 item 1): `"async": true` → 202 and a job id, `GET /jobs/{id}[?wait=]`, the
Idempotency-Key, keys, failures, and jobs that survive a kill -9 of the service."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.auth.keyfile import create_key
from reme_service.testing.openai_server import FakeOpenAI
from tests.conditions import until_sync
from tests.fakes.service_process import service_process
from tests.service.conftest import ServeFn

pytestmark = [pytest.mark.service, pytest.mark.own_backend]

TRAJECTORY = {
    "task_id": "t1",
    "messages": [{"role": "user", "content": "book a flight"}, {"role": "assistant", "content": "booked"}],
    "score": 1.0,
}


def summary(workspace: str = "ws", *, run_async: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"workspace_id": workspace, "trajectories": [TRAJECTORY]}
    return (body | {"async": True}) if run_async else body


def reply(when: str = "when booking a flight", memory: str = "compare fares first") -> str:
    return f"```json\n{json.dumps([{'when_to_use': when, 'memory': memory}])}\n```"


class Gate:
    """Holds the fake LLM's answers until opened: a job stays `running` for as long as a test needs."""

    def __init__(self) -> None:
        self.opened = threading.Event()

    def __call__(self, body: dict[str, Any]) -> str:
        assert self.opened.wait(60), "the gate was never opened"
        return reply()


@pytest.fixture
def gated(fake_openai: FakeOpenAI) -> Iterator[tuple[FakeOpenAI, str, Gate]]:
    fake, url = fake_openai, fake_openai.base_url
    gate = Gate()
    fake.on_op("SimpleSummaryOp", gate)
    yield fake, url, gate
    gate.opened.set()


def listed(client: httpx.Client, workspace: str = "ws") -> list[dict[str, Any]]:
    r = client.post("/vector_store", json={"workspace_id": workspace, "action": "list"})
    return list(r.json()["metadata"]["action_result"])


def test_an_async_summary_is_acknowledged_then_done(serve: ServeFn, gated: tuple[FakeOpenAI, str, Gate]) -> None:
    _, url, gate = gated
    with serve(env={"FLOW_LLM_BASE_URL": url}) as client:
        r = client.post("/summary_task_memory_simple", json=summary(run_async=True))
        assert r.status_code == 202, r.text
        body = r.json()
        job_id = body["job_id"]
        assert body["success"] is True and body["metadata"]["job_id"] == job_id
        assert r.headers["location"] == f"/jobs/{job_id}"
        pending = client.get(f"/jobs/{job_id}").json()
        assert pending["status"] in ("queued", "running") and pending["result"] is None
        assert listed(client) == []  # nothing written yet: the LLM has not answered
        gate.opened.set()
        done = client.get(f"/jobs/{job_id}", params={"wait": 30}).json()
        assert done["status"] == "done" and done["http_status"] == 200, done
        result = done["result"]  # the envelope the synchronous call returns
        assert result["success"] is True
        assert [m["content"] for m in result["metadata"]["memory_list"]] == ["compare fares first"]
        assert {"queued_at", "started_at", "finished_at", "queue_seconds", "run_seconds"} <= set(done["timings"])
        assert [m["content"] for m in listed(client)] == ["compare fares first"]
        # the same flow without "async" still answers at once, as ReMe's does
        sync = client.post("/summary_task_memory_simple", json=summary("ws2"))
        assert sync.status_code == 200 and sync.json()["metadata"]["memory_list"]


def test_the_same_idempotency_key_gives_the_same_job(serve: ServeFn, gated: tuple[FakeOpenAI, str, Gate]) -> None:
    fake, url, gate = gated
    with serve(env={"FLOW_LLM_BASE_URL": url}) as client:
        headers = {"Idempotency-Key": "retry-me-1"}
        first = client.post("/summary_task_memory_simple", json=summary(run_async=True), headers=headers)
        again = client.post("/summary_task_memory_simple", json=summary(run_async=True), headers=headers)
        assert first.status_code == 202 and again.status_code == 200
        assert again.json()["job_id"] == first.json()["job_id"] and again.json()["metadata"]["idempotent_replay"]
        other = client.post("/summary_task_memory_simple", json=summary("elsewhere", run_async=True), headers=headers)
        assert other.status_code == 409 and other.json()["metadata"]["error"]["code"] == "conflict"
        gate.opened.set()
        client.get(f"/jobs/{first.json()['job_id']}", params={"wait": 30})
        assert len(listed(client)) == 1  # one job ran, one memory written
        assert len(fake.requests_to("chat")) == 1
        bad = client.post("/summary_task_memory_simple", json=summary(run_async=True), headers={"Idempotency-Key": ""})
        assert bad.status_code == 400


def test_job_errors(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    fake.fail_next(10, status=500)
    with serve("llm.default.max_retries=0", env={"FLOW_LLM_BASE_URL": url}) as client:
        assert client.get("/jobs/job_nope").status_code == 404
        job_id = client.post("/summary_task_memory_simple", json=summary(run_async=True)).json()["job_id"]
        failed = client.get(f"/jobs/{job_id}", params={"wait": 30}).json()
        assert failed["status"] == "failed" and failed["http_status"] == 502
        assert failed["result"]["success"] is False and failed["result"]["metadata"]["error"]["message"]
        assert client.get(f"/jobs/{job_id}", params={"wait": 61}).status_code == 422
        invalid = client.post("/summary_task_memory_simple", json={"async": True, "trajectories": "no"})
        assert invalid.status_code == 422  # checked before it is queued
        bad_ws = client.post("/summary_task_memory_simple", json=summary("../x", run_async=True))
        assert bad_ws.status_code == 400
        # a flow that is not a background flow ignores "async" (ReMe clients may send anything)
        r = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "q", "async": True})
        assert r.status_code == 200 and "job_id" not in r.json()


def test_jobs_follow_the_keys(serve: ServeFn, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    fake.on_op("SimpleSummaryOp", reply())
    keys = tmp_path / "data" / "auth" / "keys.json"
    _, alice = create_key(keys, workspaces=["alice"], scope="write")
    _, bob = create_key(keys, workspaces=["bob"], scope="write")
    _, reader = create_key(keys, workspaces=["alice"], scope="read")
    with serve(env={"FLOW_LLM_BASE_URL": url}) as client:

        def as_(key: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {key}"}

        r = client.post("/summary_task_memory_simple", json=summary("alice", run_async=True), headers=as_(alice))
        assert r.status_code == 202
        job_id = r.json()["job_id"]
        assert client.get(f"/jobs/{job_id}", headers=as_(bob)).status_code == 404  # not bob's to see
        assert client.get(f"/jobs/{job_id}").status_code == 401
        done = client.get(f"/jobs/{job_id}", params={"wait": 30}, headers=as_(alice)).json()
        assert done["status"] == "done"
        denied = client.post("/summary_task_memory_simple", json=summary("bob", run_async=True), headers=as_(alice))
        assert denied.status_code == 403  # refused when submitted, not accepted and failed later
        read_only = client.post(
            "/summary_task_memory_simple", json=summary("alice", run_async=True), headers=as_(reader)
        )
        assert read_only.status_code == 403


def test_jobs_survive_a_kill(tmp_path: Path, gated: tuple[FakeOpenAI, str, Gate]) -> None:
    """kill -9 while a job runs and another waits: after a restart both finish, each written once."""
    _, url, gate = gated
    args = (
        f"data_dir={tmp_path / 'data'}", "embedding_model.default.backend=hash", f"llm.default.base_url={url}",
        "llm.default.backend=openai_compatible", "llm.default.api_key=k",
    )  # fmt: skip
    with service_process(tmp_path, *args) as service:
        first = httpx.post(f"{service.base_url}/summary_task_memory_simple", json=summary(run_async=True))
        second = httpx.post(
            f"{service.base_url}/summary_task_memory_simple",
            json={"workspace_id": "ws", "trajectories": [{**TRAJECTORY, "task_id": "t2"}], "async": True},
        )
        ids = [first.json()["job_id"], second.json()["job_id"]]
        running = httpx.get(f"{service.base_url}/jobs/{ids[0]}").json()
        while running["status"] != "running":  # the first job is waiting on the gated LLM
            running = httpx.get(f"{service.base_url}/jobs/{ids[0]}", params={"wait": 0.2}).json()
        assert httpx.get(f"{service.base_url}/jobs/{ids[1]}").json()["status"] == "queued"  # one per workspace
        os.kill(service.process.pid, signal.SIGKILL)
        service.process.wait()
    gate.opened.set()
    with service_process(tmp_path, *args) as service:
        finished = [httpx.get(f"{service.base_url}/jobs/{i}", params={"wait": 30}, timeout=40).json() for i in ids]
        assert [j["status"] for j in finished] == ["done", "done"], finished
        assert finished[0]["attempts"] == 2 and finished[1]["attempts"] == 1
        r = httpx.post(f"{service.base_url}/vector_store", json={"workspace_id": "ws", "action": "list"})
        assert len(r.json()["metadata"]["action_result"]) == 2  # one memory a job: the killed attempt wrote nothing


@pytest.mark.slow  # two service processes start and one is killed: ~10 s idle, over a minute under load
def test_a_job_killed_after_its_write_does_not_write_again(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    """kill -9 after a job's store write, before its end is recorded: after a restart it is not run again, so its
    memory is stored once (run again, the summary would be stored a second time under a new id). The process is
    held in that window by a real obstacle: the audit log of the day is a FIFO nobody reads, so the append that
    follows the write (`AuditLog.append_sync` opens it) blocks until the kill."""
    fake_openai.on_op("SimpleSummaryOp", lambda body: reply())
    data = tmp_path / "data"
    audit = data / "audit"
    audit.mkdir(parents=True)
    today = datetime.now(UTC)
    fifos = [audit / f"{(today + timedelta(days=d)).strftime('%Y-%m-%d')}.jsonl" for d in (0, 1)]
    for fifo in fifos:
        os.mkfifo(fifo)
    args = (
        f"data_dir={data}", "embedding_model.default.backend=hash", f"llm.default.base_url={fake_openai.base_url}",
        "llm.default.backend=openai_compatible", "llm.default.api_key=k",
    )  # fmt: skip
    with service_process(tmp_path, *args) as service, httpx.Client(base_url=service.base_url) as client:
        job_id = client.post("/summary_task_memory_simple", json=summary(run_async=True)).json()["job_id"]
        until_sync(lambda: len(listed(client)) == 1)
        assert httpx.get(f"{service.base_url}/jobs/{job_id}").json()["status"] == "running"  # held by the audit FIFO
        os.kill(service.process.pid, signal.SIGKILL)
        service.process.wait()
    for fifo in fifos:
        fifo.unlink()
    with service_process(tmp_path, *args) as service, httpx.Client(base_url=service.base_url) as client:
        job = client.get(f"/jobs/{job_id}", params={"wait": 30}, timeout=40).json()
        assert job["status"] == "failed" and "not run again" in job["result"]["metadata"]["error"]["message"]
        assert len(listed(client)) == 1  # written once
