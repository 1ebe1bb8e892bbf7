"""`http.workers`: several service processes on one port over PostgreSQL — they share the port, the store, the
jobs and the memories' history; a worker that dies is replaced; SIGTERM stops them all; a store only one process
can own is refused."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from reme_service.testing.ports import free_port
from tests.conditions import until_sync
from tests.fakes.service_process import wait_ready

pytestmark = [pytest.mark.service, pytest.mark.own_backend]

TRAJECTORY = {
    "task_id": "t",
    "messages": [{"role": "user", "content": "book a flight"}, {"role": "assistant", "content": "booked"}],
    "score": 1.0,
}


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(entry.name))
    return found


def test_a_store_one_process_owns_is_refused_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reme_service", "http.workers=2", f"data_dir={tmp_path}", f"http.port={free_port()}"],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith(("FLOW_", "REME_"))},
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "reme: http.workers=2 needs a store several processes can share, and vector_store.default is 'local': use "
        "pgvector, a Chroma server, or Elasticsearch (docs/scaling.md), or http.workers=1"
    ]


def supervisor_command(tmp_path: Path, pg_dsn: str) -> tuple[int, list[str], dict[str, str]]:
    """`reme http.workers=2` on a free port over PostgreSQL (a table prefix of its own): the port, the command and
    its environment (no FLOW_/REME_ variables of the test run)."""
    port = free_port()
    args = [
        "http.workers=2",
        f"http.port={port}",
        f"data_dir={tmp_path / 'data'}",
        "embedding_model.default.backend=hash",
        "vector_store.default.backend=pgvector",
        f"vector_store.default.params.dsn={pg_dsn}",
        f"vector_store.default.params.table_prefix=w{secrets.token_hex(3)}_",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOW_", "REME_"))}
    return port, [sys.executable, "-m", "reme_service", *args], env


def test_two_workers_share_port_store_and_jobs(tmp_path: Path, pg_dsn: str) -> None:
    port, command, env = supervisor_command(tmp_path, pg_dsn)
    parent = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(parent, base, limit=120)
        until_sync(lambda: len(children_of(parent.pid)) == 2, limit=30)
        workers = children_of(parent.pid)
        with httpx.Client(base_url=base, timeout=30) as client:
            # many connections: the kernel spreads them over both workers, which see one store
            def worker_of(fresh: httpx.Client) -> int:
                metrics = fresh.get("/metrics").text
                return int(
                    next(line for line in metrics.splitlines() if line.startswith("reme_process_info")).split('"')[1]
                )

            inserted_by: set[int] = set()
            crossed = 0  # writes searched at once through the other worker (its copy of the workspace caught up)
            for i in range(200):  # new connections until both workers have written (the kernel picks one each time)
                if i >= 40 and len(inserted_by) == 2 and crossed:
                    break
                with httpx.Client(base_url=base, timeout=30) as fresh:
                    memory = {"memory_id": f"m{i}", "when_to_use": f"case {i}", "content": f"advice {i}"}
                    r = fresh.post(
                        "/vector_store", json={"workspace_id": "w", "action": "insert", "memory_dicts": [memory]}
                    )
                    assert r.json()["success"] is True
                    writer = worker_of(fresh)
                    inserted_by.add(writer)
                with httpx.Client(base_url=base, timeout=30) as fresh:
                    query = {"workspace_id": "w", "query": f"case {i}", "top_k": 1}
                    found = fresh.post("/retrieve_task_memory", json=query).json()["metadata"]["memory_list"]
                    assert [m["memory_id"] for m in found] == [f"m{i}"]  # the write just answered, in any worker
                    crossed += worker_of(fresh) != writer
            assert inserted_by == workers and crossed
            count = i
            listed = client.post("/vector_store", json={"workspace_id": "w", "action": "list"}).json()
            assert len(listed["metadata"]["action_result"]) == count  # every write, whichever worker took it
            # each memory's history is in the shared data_dir: either worker answers it, whoever wrote it
            read_by: set[int] = set()
            for i in range(count):
                with httpx.Client(base_url=base, timeout=30) as fresh:
                    entries = fresh.get(f"/workspaces/w/memories/m{i}/history").json()
                    assert [(e["event"], e["after"]["content"]) for e in entries] == [("ADD", f"advice {i}")]
                    read_by.add(worker_of(fresh))
            assert read_by == workers
            # a job accepted by one worker is found by either
            job = client.post(
                "/summary_task_memory_simple",
                json={"workspace_id": "w", "trajectories": [TRAJECTORY], "async": True},
            ).json()["job_id"]
            answered_by: set[int] = set()
            for _ in range(200):  # until both workers have been asked
                if len(answered_by) == 2:
                    break
                with httpx.Client(base_url=base, timeout=30) as fresh:
                    seen = fresh.get(f"/jobs/{job}", params={"wait": 10})
                    assert seen.status_code == 200 and seen.json()["status"] == "done", seen.text
                    answered_by.add(worker_of(fresh))
            assert answered_by == workers  # both found it
            # a worker that dies is replaced; the service keeps answering
            victim = min(workers)
            os.kill(victim, signal.SIGKILL)
            until_sync(lambda: len(children_of(parent.pid) - {victim}) == 2, limit=60)
            wait_ready(parent, base, limit=60)
            assert client.get("/health").json()["vector_store"]["default"]["status"] == "ok"
    finally:
        parent.send_signal(signal.SIGTERM)
        _, stderr = parent.communicate(timeout=60)
    assert parent.returncode == 0, stderr
    assert "in 2 processes" in stderr
    assert children_of(parent.pid) == set()


def port_is_free(port: int) -> bool:
    """Whether the port can be bound alone (no listener, orphaned or not, holds it)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.slow  # a supervisor and its two workers start against PostgreSQL: ~30 s on a quiet 2-core machine
def test_workers_die_with_their_supervisor_and_a_second_start_is_refused(tmp_path: Path, pg_dsn: str) -> None:
    """kill -9 of the supervisor takes its workers with it (PR_SET_PDEATHSIG, and the parent pipe), freeing the
    port; while they serve, a second start on their port is refused with one line."""
    port, command, env = supervisor_command(tmp_path, pg_dsn)
    parent = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    workers: set[int] = set()
    try:
        wait_ready(parent, f"http://127.0.0.1:{port}", limit=120)
        until_sync(lambda: len(children_of(parent.pid)) == 2, limit=30)
        workers = children_of(parent.pid)
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert second.stderr.strip().count("\n") == 0 and "cannot listen on" in second.stderr, second.stderr
        parent.kill()
        parent.wait()
        until_sync(lambda: alive(workers) == set(), limit=10)
        until_sync(lambda: port_is_free(port), limit=10)
    finally:
        for pid in alive(workers):
            os.kill(pid, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()
        parent.communicate(timeout=60)


def alive(pids: set[int]) -> set[int]:
    """The processes of `pids` still running (not zombies)."""
    found = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if state != "Z":
            found.add(pid)
    return found
