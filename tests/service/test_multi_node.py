"""Three nodes, one PostgreSQL (#38): three service processes with data dirs of their own, on one pgvector store
and one PostgreSQL state (`state.backend: auto`), behind Debian's haproxy. What one node does, every node sees:
keys (made and revoked with any node's config), change events, history, jobs and Idempotency-Keys, the audit
trail, the working-memory files; and a node killed with -9 leaves its acknowledged jobs to the others and loses
none of its acknowledged writes (memory, history, audit line).

One cluster for the module (starting three processes is the slow part); the node-killing tests run last: A is
killed with queued jobs, then B during synchronous writes.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from reme_service.testing.haproxy import haproxy_binary, running_haproxy
from reme_service.testing.openai_server import FakeOpenAI
from tests.conditions import until_sync
from tests.fakes.pg_server import pg_dsn  # noqa: F401 - fixture used by name
from tests.fakes.service_process import ServiceProcess, service_process
from tests.sse import next_event

pytestmark = [
    pytest.mark.service,
    pytest.mark.own_backend,
    pytest.mark.slow,  # three service processes and haproxy: ~30 s for the module
    pytest.mark.skipif(haproxy_binary() is None, reason="haproxy is not installed (scripts/install_haproxy.sh)"),
]

NODES = ("a", "b", "c")


class Hold:
    """The fake LLM's summary answers wait while `closed` is set: jobs stay `running` for as long as a test needs."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.opened.set()

    def __call__(self, body: dict[str, Any]) -> str:
        assert self.opened.wait(120), "the hold was never released"
        memory = [{"when_to_use": "when booking a flight", "memory": "compare fares first"}]
        return f"```json\n{json.dumps(memory)}\n```"


@dataclass
class Cluster:
    nodes: dict[str, ServiceProcess]
    args: dict[str, list[str]]
    balancer: str
    admin: dict[str, str]
    hold: Hold

    def url(self, node: str) -> str:
        return self.nodes[node].base_url


def reme(*args: str) -> subprocess.CompletedProcess[str]:
    """`reme ...` as a separate process (the CLI an operator runs on a node)."""
    return subprocess.run([sys.executable, "-m", "reme_service", *args], capture_output=True, text=True, timeout=60)


def new_key(config: list[str], *workspaces: str, scope: str = "write") -> str:
    flags = [part for workspace in workspaces for part in ("--workspace", workspace)]
    done = reme("keys", "create", *flags, "--scope", scope, *config)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, pg_dsn: str) -> Iterator[Cluster]:  # noqa: F811
    root = tmp_path_factory.mktemp("cluster")
    prefix = f"mn{secrets.token_hex(4)}_"
    hold = Hold()
    fake = FakeOpenAI()
    fake.on_op("SimpleSummaryOp", hold)
    with ExitStack() as stack:
        llm_url = stack.enter_context(fake.running())
        common = [
            "embedding_model.default.backend=hash", "vector_store.default.backend=pgvector",
            f"vector_store.default.params.dsn={pg_dsn}", f"vector_store.default.params.table_prefix={prefix}",
            f"state.table_prefix={prefix}s_", "auth.mode=required", "llm.default.backend=openai_compatible",
            f"llm.default.base_url={llm_url}", "llm.default.api_key=k", "llm.default.max_retries=0",
        ]  # fmt: skip
        args = {node: [f"data_dir={root / node / 'data'}", *common] for node in NODES}
        admin_key = new_key(args["a"], "*", scope="admin")  # before any node starts: auth.mode=required needs one
        nodes = {node: stack.enter_context(service_process(root / node, *args[node])) for node in NODES}
        backends = [(node, nodes[node].base_url.removeprefix("http://")) for node in NODES]
        balancer = stack.enter_context(running_haproxy(root, backends))
        yield Cluster(nodes, args, balancer, {"Authorization": f"Bearer {admin_key}"}, hold)
        hold.opened.set()


def post(url: str, flow: str, headers: dict[str, str], **body: Any) -> httpx.Response:
    return httpx.post(f"{url}/{flow}", json=body, headers=headers, timeout=60)


def insert(url: str, headers: dict[str, str], workspace: str, memory_id: str, text: str) -> httpx.Response:
    memory = {"memory_id": memory_id, "when_to_use": f"when {text}", "content": text}
    answer = post(url, "vector_store", headers, workspace_id=workspace, action="insert", memory_dicts=[memory])
    assert answer.status_code == 200, answer.text
    return answer


def test_a_key_made_with_one_nodes_config_works_everywhere_and_its_revocation_too(cluster: Cluster) -> None:
    key = new_key(cluster.args["a"], "keys-ws")
    auth = {"Authorization": f"Bearer {key}"}

    def answers(node: str) -> int:
        return post(cluster.url(node), "vector_store", auth, workspace_id="keys-ws", action="list").status_code

    until_sync(lambda: all(answers(node) == 200 for node in NODES), limit=3)
    insert(cluster.balancer, auth, "keys-ws", "k1", "through the balancer")
    for _ in range(3):  # each request to the next node: one service
        listed = post(cluster.balancer, "vector_store", auth, workspace_id="keys-ws", action="list").json()
        assert [m["memory_id"] for m in listed["metadata"]["action_result"]] == ["k1"]
    key_id = key.split("_")[1]
    done = reme("keys", "revoke", key_id, *cluster.args["c"])
    assert done.returncode == 0, done.stderr
    until_sync(lambda: all(answers(node) == 401 for node in NODES), limit=3)
    listed_keys = reme("keys", "list", *cluster.args["b"]).stdout
    assert key_id in listed_keys and "revoked" in listed_keys


def test_events_on_one_node_see_a_write_made_on_another(cluster: Cluster) -> None:
    with httpx.stream(
        "GET", f"{cluster.url('b')}/events", params={"workspace": "ev-ws"}, headers=cluster.admin, timeout=30
    ) as stream:
        lines = stream.iter_lines()
        assert next(lines) == "retry: 3000"
        insert(cluster.url("a"), cluster.admin, "ev-ws", "e1", "seen elsewhere")
        kind, data = next_event(lines)
        assert kind == "ADD" and json.loads(data)["memory_ids"] == ["e1"]


def test_history_of_a_memory_written_on_two_nodes_is_read_on_a_third(cluster: Cluster) -> None:
    insert(cluster.url("a"), cluster.admin, "hist-ws", "h1", "first text")
    insert(cluster.url("b"), cluster.admin, "hist-ws", "h1", "second text")
    entries = httpx.get(f"{cluster.url('c')}/workspaces/hist-ws/memories/h1/history", headers=cluster.admin).json()
    assert [entry["event"] for entry in entries] == ["ADD", "UPDATE"], entries


def summary(workspace: str) -> dict[str, Any]:
    trajectory = {
        "task_id": "t",
        "messages": [{"role": "user", "content": "book"}, {"role": "assistant", "content": "ok"}],
    }
    return {"workspace_id": workspace, "trajectories": [trajectory], "async": True}


def test_a_job_acknowledged_by_one_node_is_read_on_another_and_a_key_names_one_job(cluster: Cluster) -> None:
    acked = httpx.post(f"{cluster.url('a')}/summary_task_memory_simple", json=summary("job-ws"), headers=cluster.admin)
    assert acked.status_code == 202, acked.text
    job_id = acked.json()["job_id"]
    done = httpx.get(f"{cluster.url('b')}/jobs/{job_id}", params={"wait": 30}, headers=cluster.admin, timeout=40)
    assert done.json()["status"] == "done", done.json()
    headers = {**cluster.admin, "Idempotency-Key": f"once-{secrets.token_hex(4)}"}
    first = httpx.post(f"{cluster.url('a')}/summary_task_memory_simple", json=summary("idem-ws"), headers=headers)
    again = httpx.post(f"{cluster.url('c')}/summary_task_memory_simple", json=summary("idem-ws"), headers=headers)
    assert first.status_code == 202 and again.status_code == 200 and again.json()["metadata"]["idempotent_replay"]
    assert first.json()["job_id"] == again.json()["job_id"]


def test_the_audit_command_with_one_nodes_config_lists_writes_made_on_the_others(cluster: Cluster) -> None:
    made = [
        insert(cluster.url("a"), cluster.admin, "audit-ws", "x1", "on a").headers["x-request-id"],
        insert(cluster.url("b"), cluster.admin, "audit-ws", "x2", "on b").headers["x-request-id"],
    ]
    done = reme("audit", "--workspace", "audit-ws", "--json", *cluster.args["c"])
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["request_id"] for line in done.stdout.splitlines()] == made


def test_working_memory_offloaded_on_one_node_is_read_and_grepped_on_another(cluster: Cluster) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "find the failing payment"}]
    for i in range(3):
        call = {"id": f"c{i}", "function": {"name": "logs", "arguments": "{}"}}
        output = "\n".join([f"line {n} ok" for n in range(200)] + [f"ERROR payment 47{i} declined"])
        messages += [{"role": "assistant", "content": "", "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": output}]  # fmt: skip
    offloaded = post(cluster.url("a"), "summary_working_memory", cluster.admin, workspace_id="wm-ws",
                     messages=messages, working_summary_mode="compact", max_tool_message_tokens=50,
                     max_total_tokens=500, keep_recent_count=1, store_dir="s")  # fmt: skip
    assert offloaded.status_code == 200, offloaded.text
    files = list(offloaded.json()["metadata"]["write_file_dict"])
    assert len(files) >= 2 and all(path.startswith("s/") for path in files), files
    read = post(cluster.url("b"), "read_working_memory", cluster.admin, workspace_id="wm-ws", file_path=files[0],
                offset=200, limit=5)  # fmt: skip
    assert read.status_code == 200 and read.json()["answer"] == "ERROR payment 470 declined", read.text
    grep = post(cluster.url("b"), "grep_working_memory", cluster.admin, workspace_id="wm-ws", file_path=files[1],
                pattern=r"error payment \d+")  # fmt: skip
    assert grep.json()["answer"] == f"{files[1]}:201:ERROR payment 471 declined", grep.text
    missing = post(cluster.url("b"), "read_working_memory", cluster.admin, workspace_id="other-ws", file_path=files[0])
    assert missing.status_code == 404, missing.text  # another workspace's folder
    erased = post(cluster.url("c"), "vector_store", cluster.admin, workspace_id="wm-ws", action="delete")
    assert erased.json()["metadata"]["action_result"]["purged"]["working_memory_files"] == len(files), erased.text
    gone = post(cluster.url("a"), "read_working_memory", cluster.admin, workspace_id="wm-ws", file_path=files[0])
    assert gone.status_code == 404, gone.text


def test_a_killed_nodes_acknowledged_jobs_are_all_done_by_the_others(cluster: Cluster) -> None:
    cluster.hold.opened.clear()  # A's jobs wait on the LLM: running (one per workspace) or queued behind them
    ids = []
    for index in range(20):
        acked = httpx.post(
            f"{cluster.url('a')}/summary_task_memory_simple", json=summary(f"kill-ws{index % 5}"), headers=cluster.admin
        )
        assert acked.status_code == 202, acked.text
        ids.append(acked.json()["job_id"])

    def status(job_id: str) -> str:
        return str(httpx.get(f"{cluster.url('b')}/jobs/{job_id}", headers=cluster.admin).json()["status"])

    until_sync(lambda: status(ids[0]) == "running")
    node = cluster.nodes["a"]
    os.kill(node.process.pid, signal.SIGKILL)
    node.process.wait()
    assert {status(job_id) for job_id in ids} <= {"queued", "running"}  # nothing finished before the kill
    cluster.hold.opened.set()
    until_sync(lambda: all(status(job_id) == "done" for job_id in ids), limit=120)
    finished = [httpx.get(f"{cluster.url('b')}/jobs/{job_id}", headers=cluster.admin).json() for job_id in ids]
    assert max(job["attempts"] for job in finished) == 2  # the ones A was running ran once more, on B or C
    for index in range(5):  # each job wrote its one memory once: four jobs a workspace, the same memory each time
        listed = post(cluster.url("c"), "vector_store", cluster.admin, workspace_id=f"kill-ws{index}", action="list")
        assert len(listed.json()["metadata"]["action_result"]) >= 1


class Writers:
    """Clients writing through one node in threads until it stops answering: `vector_store insert` (one memory a
    request) and `POST /workspaces/{id}/memories`, each keeping the memory ids and request ids acknowledged."""

    FLOW_WS, MANAGE_WS = "kill9-flow", "kill9-manage"

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url, self.headers = url, headers
        self.acked: dict[str, list[tuple[str, str]]] = {self.FLOW_WS: [], self.MANAGE_WS: []}
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self.write, args=(workspace, n), daemon=True)
            for workspace in self.acked
            for n in range(2)
        ]

    def count(self) -> int:
        with self.lock:
            return sum(len(done) for done in self.acked.values())

    def write(self, workspace: str, thread: int) -> None:
        with httpx.Client(base_url=self.url, headers=self.headers, timeout=30) as client:
            for index in range(100_000):
                memory_id = f"t{thread}-{index}"
                memory = {"memory_id": memory_id, "when_to_use": f"when {memory_id}", "content": f"text {memory_id}"}
                try:
                    if workspace == self.FLOW_WS:
                        body = {"workspace_id": workspace, "action": "insert", "memory_dicts": [memory]}
                        answer = client.post("/vector_store", json=body)
                        acked = answer.status_code == 200 and answer.json()["success"] is True
                    else:
                        answer = client.post(f"/workspaces/{workspace}/memories", json=memory)
                        acked = answer.status_code == 201
                except httpx.TransportError:
                    return  # the node is gone
                if acked:
                    with self.lock:
                        self.acked[workspace].append((memory_id, answer.headers["x-request-id"]))


def test_a_node_killed_during_writes_loses_no_acknowledged_memory_history_or_audit_line(cluster: Cluster) -> None:
    """After the jobs' test (node A is gone): B is killed with -9 while four clients write through it; every write
    it acknowledged is found via C with its history (ADD) and its audit line."""
    writers = Writers(cluster.url("b"), cluster.admin)
    for thread in writers.threads:
        thread.start()
    until_sync(lambda: writers.count() >= 40, limit=60)
    node = cluster.nodes["b"]
    os.kill(node.process.pid, signal.SIGKILL)
    node.process.wait()
    for thread in writers.threads:
        thread.join(60)
        assert not thread.is_alive()
    config = cluster.args["c"]
    for workspace, acked in writers.acked.items():
        assert acked, workspace
        listed = post(cluster.url("c"), "vector_store", cluster.admin, workspace_id=workspace, action="list")
        stored = {m["memory_id"] for m in listed.json()["metadata"]["action_result"]}
        assert {memory_id for memory_id, _ in acked} <= stored, workspace
        for memory_id, _ in acked:
            url = f"{cluster.url('c')}/workspaces/{workspace}/memories/{memory_id}/history"
            entries = httpx.get(url, headers=cluster.admin).json()
            assert [entry["event"] for entry in entries] == ["ADD"], (workspace, memory_id, entries)
        done = reme("audit", "--workspace", workspace, "--json", *config)
        assert done.returncode == 0, done.stderr
        audited = {json.loads(line)["request_id"] for line in done.stdout.splitlines()}
        assert {request_id for _, request_id in acked} <= audited, workspace
