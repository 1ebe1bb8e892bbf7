"""Several service processes on one Chroma server: are concurrent writes lost with the cross-process lock on / off?

Starts one real `chroma run` server (retrieval_speed.running_chroma), then for each mode of `--modes` (default
on,off) `--processes` service processes (hash embedder, no LLM, each in its own working directory) that share
it under one fresh collection prefix `mpw-<hex>-`, so they serve the same workspaces. Mode `on` sets
`vector_store.default.params.shared_lock=true` (the workspace lock also excludes the other processes: a lease
record in `<prefix>_locks`), mode `off` sets it to false (each process only serialises its own requests). Each
mode gets fresh processes and a fresh prefix. Three workloads then run at the same time, their requests
interleaved and sent by `--concurrency` clients in total, client k talking to process k mod `--processes`:

1. counters (workspace `rec`): 3 task memories are inserted first, then `--requests` `record_task_memory`
   requests each count a use of all three (a read-modify-write of `metadata.freq` under the workspace lock);
   afterwards `vector_store` `list` reads the counters. Expected: 3 x the successful requests.
2. tool appends (workspace `tools`): `--requests` `add_tool_call_result` requests, one distinct `web_search`
   call each (a read-modify-write of the tool's single memory; the flow's history cap is raised to at least
   `--requests`); afterwards `retrieve_tool_memory` reads the call history.
3. inserts (workspace `ins`): `--requests` `vector_store` `insert` requests of one memory each, distinct ids
   (no read-modify-write, so a control that should lose nothing in either mode); afterwards `list`.

    .venv/bin/python cookbook/bench/multiprocess_writers.py
    .venv/bin/python cookbook/bench/multiprocess_writers.py --processes 3 --requests 200 --modes on
    .venv/bin/python cookbook/bench/multiprocess_writers.py --lock-ttl 5 --keep   # keep the server logs

The figures, per mode and workload: requests sent; failures (anything but HTTP 200 with `success: true`, or a
counter request that did not find its memories), each printed with its status and the start of its body; lost
writes = successful writes missing from the store afterwards (counters: increments, tools: calls, inserts:
memories); stored/expected as read back; p50/p95 request latency; req/s = requests / wall time from the common
start to that workload's last answer (the three workloads share the clients, so this is not each one's peak).
In mode `off` the processes overwrite each other's read-modify-writes: lost counters and calls are expected
there and only reported, and so are their failures: without the lock, concurrent first writes to a new
workspace from several processes can meet a transient Chroma 500 ("Error creating hnsw segment reader: Nothing
found on disk"), which the service answers with 503 store_unavailable.

The exit code is 1 when mode `on` lost a write or had a failure, 2 when the run could not complete (a server did
not start, a set-up or read-back request failed), 130 on Ctrl-C, else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import secrets
import shutil
import sys
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import retrieval_speed as rs

MODES = ("on", "off")
COUNTER_IDS = ("m0", "m1", "m2")
TOOL = "web_search"
BODY_CHARS = 200
SHOWN_FAILURES = 5
DEFAULT_HISTORY_CAP = 100  # ParseToolCallResultOp's max_history_tool_call_cnt in flows/tool.yaml
DEFAULT_LIMIT_CONCURRENCY = 256  # http.limit_concurrency in default.yaml
# No LLM, whatever FLOW_LLM_* the environment holds (the tool-call judge uses its heuristic); the JSON quotes
# keep "none" a string (a bare none is read as null).
NO_LLM = 'llm.default.backend="none"'

Verify = Callable[[httpx.AsyncClient, "Workload"], Awaitable[None]]


# ----------------------------------------------------------------------------------------------------------------
# Workloads
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class Workload:
    """One kind of write: its requests, what came back, and what the store holds afterwards."""

    name: str
    path: str
    payloads: list[dict[str, Any]]
    verify: Verify
    samples: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    succeeded: list[int] = field(default_factory=list)  # indexes of the requests that answered success
    wall_s: float = 0.0
    expected: int = 0
    stored: int = 0
    lost: int = 0

    @property
    def requests(self) -> int:
        return len(self.payloads)

    def latency_ms(self, q: float) -> float:
        return rs.percentile(sorted(self.samples), q) * 1e3

    @property
    def req_per_s(self) -> float:
        return self.requests / self.wall_s if self.wall_s else float("nan")


@dataclass
class ModeResult:
    mode: str
    prefix: str
    processes: int
    workloads: list[Workload]

    @property
    def lost(self) -> int:
        return sum(w.lost for w in self.workloads)

    @property
    def failures(self) -> int:
        return sum(len(w.failures) for w in self.workloads)

    def verdict(self) -> str:
        summary = f"{self.lost} lost writes, {self.failures} failed requests"
        if self.mode == "on":
            ok = not self.lost and not self.failures
            return f"mode on:  {'PASS' if ok else 'FAIL'} - {summary} with the shared lock"
        return f"mode off: {summary} without the shared lock (losses expected there; reported only)"


def counter_payload(_: int) -> dict[str, Any]:
    memory_dicts = [{"memory_id": memory_id} for memory_id in COUNTER_IDS]
    return {"workspace_id": "rec", "memory_dicts": memory_dicts, "update_utility": False}


def tool_payload(n: int) -> dict[str, Any]:
    call = {"tool_name": TOOL, "input": {"query": f"q{n}"}, "output": f"result {n}", "success": True, "time_cost": 0.1}
    return {"workspace_id": "tools", "tool_call_results": [call]}


def insert_payload(n: int) -> dict[str, Any]:
    memory = {"memory_id": f"ins{n}", "when_to_use": f"inserted memory number {n}", "content": f"insert {n}"}
    return {"workspace_id": "ins", "action": "insert", "memory_dicts": [memory]}


def make_workloads(requests: int) -> list[Workload]:
    return [
        Workload("counters", "/record_task_memory", [counter_payload(n) for n in range(requests)], verify_counters),
        Workload("tool appends", "/add_tool_call_result", [tool_payload(n) for n in range(requests)], verify_tools),
        Workload("inserts", "/vector_store", [insert_payload(n) for n in range(requests)], verify_inserts),
    ]


# ----------------------------------------------------------------------------------------------------------------
# Requests and read-back
# ----------------------------------------------------------------------------------------------------------------


def response_problem(workload: Workload, response: httpx.Response) -> str | None:
    """None when the response is a success, else what is wrong (status and the start of the body)."""
    head = f"HTTP {response.status_code}: {response.text[:BODY_CHARS]}"
    if response.status_code != 200:
        return head
    try:
        body = response.json()
    except ValueError:
        return f"{head} (not JSON)"
    if not isinstance(body, dict) or body.get("success") is not True:
        return f"{head} (success is not true)"
    if workload.name == "counters" and (missing := body.get("metadata", {}).get("not_found_memory_ids")):
        return f"{head} (memories not found: {missing})"
    return None


async def post_ok(client: httpx.AsyncClient, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A set-up or read-back request, which must succeed for the run to mean anything."""
    response = await client.post(path, json=payload)
    body = response.json() if response.status_code == 200 else {}
    if body.get("success") is not True:
        raise RuntimeError(f"{path} {payload} via {client.base_url}: HTTP {response.status_code}: {response.text}")
    return body


async def list_memories(client: httpx.AsyncClient, workspace_id: str) -> list[dict[str, Any]]:
    body = await post_ok(client, "/vector_store", {"workspace_id": workspace_id, "action": "list"})
    return list(body["metadata"]["action_result"])


async def insert_counter_memories(client: httpx.AsyncClient) -> None:
    memory_dicts = [
        {"memory_id": memory_id, "when_to_use": f"task number {i}", "content": f"c{i}"}
        for i, memory_id in enumerate(COUNTER_IDS)
    ]
    await post_ok(client, "/vector_store", {"workspace_id": "rec", "action": "insert", "memory_dicts": memory_dicts})


def _freq(memory: dict[str, Any]) -> int:
    value = (memory.get("metadata") or {}).get("freq", 0)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


async def verify_counters(client: httpx.AsyncClient, workload: Workload) -> None:
    freq = {m["memory_id"]: _freq(m) for m in await list_memories(client, "rec")}
    per_memory = len(workload.succeeded)
    workload.expected = per_memory * len(COUNTER_IDS)
    workload.stored = sum(freq.get(memory_id, 0) for memory_id in COUNTER_IDS)
    workload.lost = sum(max(per_memory - freq.get(memory_id, 0), 0) for memory_id in COUNTER_IDS)


async def verify_tools(client: httpx.AsyncClient, workload: Workload) -> None:
    body = await post_ok(client, "/retrieve_tool_memory", {"workspace_id": "tools", "tool_names": TOOL})
    memories = body["metadata"].get("memory_list") or []
    calls = memories[0]["tool_call_results"] if memories else []
    queries = {call["input"].get("query") for call in calls if isinstance(call.get("input"), dict)}
    expected = {f"q{n}" for n in workload.succeeded}
    workload.expected, workload.stored, workload.lost = len(expected), len(calls), len(expected - queries)


async def verify_inserts(client: httpx.AsyncClient, workload: Workload) -> None:
    ids = {m["memory_id"] for m in await list_memories(client, "ins")}
    expected = {f"ins{n}" for n in workload.succeeded}
    workload.expected, workload.stored, workload.lost = len(expected), len(ids), len(expected - ids)


async def worker(client: httpx.AsyncClient, jobs: deque[tuple[Workload, int]], start: float) -> None:
    """One concurrent client: takes the next request of any workload until none is left."""
    while jobs:
        workload, index = jobs.popleft()
        began = time.perf_counter()
        try:
            response = await client.post(workload.path, json=workload.payloads[index])
            problem = response_problem(workload, response)
        except httpx.HTTPError as exc:
            problem = f"{type(exc).__name__}: {exc}"[:BODY_CHARS]
        done = time.perf_counter()
        workload.samples.append(done - began)
        workload.wall_s = max(workload.wall_s, done - start)
        if problem:
            workload.failures.append(f"#{index} via {client.base_url}: {problem}")
        else:
            workload.succeeded.append(index)


async def drive(
    servers: Sequence[rs.Server], workloads: Sequence[Workload], concurrency: int, request_timeout: float
) -> None:
    """Set up, run every workload at once (requests interleaved), then read back what the store holds."""
    per_process = math.ceil(concurrency / len(servers))
    limits = httpx.Limits(max_connections=per_process, max_keepalive_connections=per_process)
    requests = max(w.requests for w in workloads)
    jobs = deque((w, i) for i in range(requests) for w in workloads if i < w.requests)
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=s.base_url, limits=limits, timeout=request_timeout)
            )
            for s in servers
        ]
        await insert_counter_memories(clients[0])
        start = time.perf_counter()
        await asyncio.gather(*(worker(clients[k % len(clients)], jobs, start) for k in range(concurrency)))
        for workload in workloads:  # read back through another process than the one that set up, when there is one
            await workload.verify(clients[-1], workload)


# ----------------------------------------------------------------------------------------------------------------
# One mode
# ----------------------------------------------------------------------------------------------------------------


def mode_overrides(mode: str, prefix: str, args: argparse.Namespace, chroma: Sequence[str]) -> list[str]:
    params = "vector_store.default.params"
    overrides = [
        *rs.BASE_OVERRIDES,
        *rs.STORE_OVERRIDES["chroma"],
        *chroma,
        f"{params}.collection_prefix={prefix}",
        f"{params}.shared_lock={'true' if mode == 'on' else 'false'}",
        NO_LLM,
        "flow.add_tool_call_result.flow_content=ParseToolCallResultOp("
        f"max_history_tool_call_cnt={max(DEFAULT_HISTORY_CAP, args.requests)})",
        f"http.limit_concurrency={max(DEFAULT_LIMIT_CONCURRENCY, math.ceil(args.concurrency / args.processes) + 64)}",
    ]
    if args.lock_ttl is not None:
        overrides.append(f"{params}.lock_ttl={args.lock_ttl}")
    if args.lock_wait is not None:
        overrides.append(f"{params}.lock_wait={args.lock_wait}")
    return [*overrides, *args.overrides]


def run_mode(mode: str, args: argparse.Namespace, chroma: Sequence[str], tmp: Path) -> ModeResult:
    prefix = f"mpw-{secrets.token_hex(4)}-"
    overrides = mode_overrides(mode, prefix, args, chroma)
    lock = "true" if mode == "on" else "false"
    print(f"\n== mode {mode}: shared_lock={lock}, {args.processes} processes, prefix {prefix}", flush=True)
    workloads = make_workloads(args.requests)
    with contextlib.ExitStack() as stack:
        servers = []
        for index in range(args.processes):
            workdir = tmp / f"{mode}-p{index}"
            workdir.mkdir()
            servers.append(
                stack.enter_context(rs.running_server(args.python, workdir, overrides, args.startup_timeout))
            )
        asyncio.run(drive(servers, workloads, args.concurrency, args.timeout))
    result = ModeResult(mode, prefix, args.processes, workloads)
    print_mode(result, args)
    return result


def print_mode(result: ModeResult, args: argparse.Namespace) -> None:
    print(
        f"\nmode {result.mode}: {result.processes} service processes on one Chroma server; {args.concurrency} clients "
        "in all, round-robin over the processes; the three workloads at once"
    )
    header = (
        f"   {'workload':<13} {'requests':>8} {'failures':>8} {'lost':>6} {'stored/expected':>16} "
        f"{'p50 ms':>8} {'p95 ms':>8} {'req/s':>7}"
    )
    print(header)
    print("   " + "-" * (len(header) - 3))
    for w in result.workloads:
        stored = f"{w.stored}/{w.expected}"
        print(
            f"   {w.name:<13} {w.requests:>8} {len(w.failures):>8} {w.lost:>6} {stored:>16} "
            f"{w.latency_ms(50):>8.1f} {w.latency_ms(95):>8.1f} {w.req_per_s:>7.1f}"
        )
    print("   (counters: stored/expected = increments summed over the 3 memories; tools: calls; inserts: memories)")
    for w in result.workloads:
        for failure in w.failures[:SHOWN_FAILURES]:
            print(f"   FAILURE {w.name} {failure}")
        if len(w.failures) > SHOWN_FAILURES:
            print(f"   ... and {len(w.failures) - SHOWN_FAILURES} more {w.name} failures")
    print(f"   {result.verdict()}", flush=True)


# ----------------------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------------------


def _modes(text: str) -> list[str]:
    values = [part.strip() for part in text.split(",") if part.strip()]
    if not values or any(v not in MODES for v in values):
        raise argparse.ArgumentTypeError(f"choose from {', '.join(MODES)} (comma-separated), not {text!r}")
    return values


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=rs.positive_int, default=2, help="service processes per mode (default 2)")
    parser.add_argument("--requests", type=rs.positive_int, default=60, help="requests per workload (default 60)")
    parser.add_argument("--concurrency", type=rs.positive_int, default=16, help="concurrent clients in total")
    parser.add_argument(
        "--modes", type=_modes, default=list(MODES), help="shared-lock settings to run (default on,off)"
    )
    parser.add_argument("--lock-ttl", type=float, help="vector_store.default.params.lock_ttl (default: the service's)")
    parser.add_argument(
        "--lock-wait", type=float, help="vector_store.default.params.lock_wait (default: the service's)"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request (above lock_wait)")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs the servers")
    parser.add_argument("--dir", default=None, help="parent of the temporary working directory")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (server and chroma logs)")
    parser.add_argument("--startup-timeout", type=float, default=60.0)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="extra service overrides")
    args = parser.parse_args(argv)
    if bad := [o for o in args.overrides if "=" not in o]:
        parser.error(f"overrides must be key=value: {' '.join(bad)}")
    return args


def run(args: argparse.Namespace) -> list[ModeResult]:
    tmp = Path(tempfile.mkdtemp(prefix="multiprocess-writers-", dir=args.dir)).resolve()
    try:
        with rs.running_chroma(tmp, args.startup_timeout) as chroma:
            return [run_mode(mode, args, chroma, tmp) for mode in args.modes]
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rs._terminate_on_sigterm()
    started = time.perf_counter()
    try:
        results = run(args)
    except KeyboardInterrupt:
        print("\ninterrupted; servers stopped", file=sys.stderr)
        return 130
    except (RuntimeError, httpx.HTTPError, OSError) as exc:
        print(f"multiprocess_writers: {exc}", file=sys.stderr)
        return 2
    print(f"\nverdicts ({time.perf_counter() - started:.1f} s in all):")
    for result in results:
        print(f"   {result.verdict()}")
    failed = any(r.mode == "on" and (r.lost or r.failures) for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
