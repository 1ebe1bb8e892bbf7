"""Concurrent tool-call appends: N single-call `add_tool_call_result` requests for one tool, all at once.

Starts the real service in a child process (HTTP on loopback, no LLM so the heuristic judge runs, hash
embedder, local store in a temporary directory), fires every request at the same moment over HTTP, then
checks with `retrieve_tool_memory` that no call was lost: the overall call count equals N and, when the
history cap is at least N, every call's input is in the stored history.

    .venv/bin/python cookbook/bench/tool_memory_concurrency.py                  # 1,000 requests, cap 1,000
    .venv/bin/python cookbook/bench/tool_memory_concurrency.py --history-cap 100  # the default cap

Prints the wall time, the time per call (wall time / N), request latency percentiles and the checks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from reme_service.testing.percentiles import percentile
from reme_service.testing.ports import free_port

TOOL = "bench_tool"
WORKSPACE = "concurrency_bench"


def start_service(data_dir: Path, port: int, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_")}
    command = [
        sys.executable,
        "-m",
        "reme_service",
        f"data_dir={data_dir}",
        f"http.port={port}",
        f"http.limit_concurrency={args.requests + 64}",
        "embedding_model.default.backend=hash",
        f"vector_store.default.backend={args.store}",
        "log_level=WARNING",
        'enabled_flows=["add_tool_call_result", "retrieve_tool_memory"]',
        f"flow.add_tool_call_result.flow_content=ParseToolCallResultOp(max_history_tool_call_cnt={args.history_cap})",
    ]
    return subprocess.Popen(command, cwd=data_dir, env=env)


async def wait_healthy(client: httpx.AsyncClient, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the service exited with code {process.returncode}")
        try:
            if (await client.get("/health")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise SystemExit("the service did not become healthy in time")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (Linux /proc), or None where that is not available."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def call_record(i: int) -> dict[str, object]:
    return {
        "tool_name": TOOL,
        "input": {"request": i, "query": f"lookup {i}"},
        "output": f"result {i}" if i % 10 else f"Error: backend timeout on request {i}",
        "success": i % 10 != 0,
        "time_cost": round(0.05 + (i % 7) * 0.01, 3),
        "token_cost": 20 + i % 5,
    }


async def post_json(host: str, port: int, path: str, payload: object, start: asyncio.Event) -> tuple[int, bytes, float]:
    """One POST on its own connection, opened before `start` is set; returns (status, body, seconds after start).

    A minimal HTTP/1.1 client on asyncio streams: with a thousand connections, a full client library spends more
    CPU than the service does, and this benchmark measures the service.
    """
    reader, writer = await asyncio.open_connection(host, port)
    body = json.dumps(payload).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    try:
        await start.wait()
        began = time.perf_counter()
        writer.write(head.encode() + body)
        await writer.drain()
        status = int((await reader.readline()).split()[1])
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        data = await reader.readexactly(length)
        return status, data, time.perf_counter() - began
    finally:
        writer.close()
        await writer.wait_closed()


async def one(port: int, i: int, start: asyncio.Event) -> tuple[int, float]:
    payload = {"workspace_id": WORKSPACE, "tool_call_results": [call_record(i)]}
    status, data, elapsed = await post_json("127.0.0.1", port, "/add_tool_call_result", payload, start)
    ok = status == 200 and json.loads(data).get("success") is True
    return (200 if ok else status), elapsed


async def run(args: argparse.Namespace, port: int, process: subprocess.Popen[bytes]) -> int:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=300) as client:
        await wait_healthy(client, process)
        start = asyncio.Event()
        tasks = [asyncio.create_task(one(port, i, start)) for i in range(args.requests)]
        await asyncio.sleep(1.0)  # every connection is open and waiting on the event
        server_cpu, client_cpu = cpu_seconds(process.pid), time.process_time()
        began = time.perf_counter()
        start.set()
        results = await asyncio.gather(*tasks)
        wall = time.perf_counter() - began
        server_end, client_cpu = cpu_seconds(process.pid), time.process_time() - client_cpu
        check = await client.post("/retrieve_tool_memory", json={"workspace_id": WORKSPACE, "tool_names": TOOL})
    body = check.json()
    stats = body["metadata"]["statistics"][TOOL]
    history = body["metadata"]["memory_list"][0]["tool_call_results"]
    seen = {call["input"]["request"] for call in history}
    failures = [status for status, _ in results if status != 200]
    latencies = [elapsed for _, elapsed in results]
    expected_history = min(args.requests, args.history_cap)
    print(f"requests            {args.requests} concurrent single-call add_tool_call_result, one tool, no LLM")
    print(f"store / history cap {args.store} / {args.history_cap}")
    print(f"wall time           {wall:8.3f} s   ({args.requests / wall:,.0f} calls/s)")
    print(f"time per call       {wall / args.requests * 1e3:8.3f} ms  (wall time / calls)")
    print(
        f"request latency     p50 {statistics.median(latencies) * 1e3:8.1f} ms   "
        f"p95 {percentile(latencies, 95) * 1e3:8.1f} ms   max {max(latencies) * 1e3:8.1f} ms"
    )
    if server_cpu is not None and server_end is not None:
        print(f"server CPU per call {(server_end - server_cpu) / args.requests * 1e3:8.3f} ms")
    print(f"client CPU per call {client_cpu / args.requests * 1e3:8.3f} ms  (this process)")
    print(f"failed requests     {len(failures)}")
    print(f"overall calls       {stats['total_calls']} (expected {args.requests})")
    print(f"history kept        {len(history)} records, {len(seen)} distinct (expected {expected_history})")
    overall = stats["overall"]
    print(f"overall success     {overall['success_rate']}  avg score {overall['avg_score']}")
    lost = stats["total_calls"] != args.requests or len(seen) != expected_history or failures
    print("RESULT              " + ("CALLS LOST" if lost else "every call kept"))
    return 1 if lost else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--history-cap", type=int, default=1000, help="max_history_tool_call_cnt of the flow")
    parser.add_argument("--store", default="local", choices=["local", "memory"])
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="reme-tool-bench-") as tmp:
        port = free_port()
        process = start_service(Path(tmp), port, args)
        try:
            return asyncio.run(run(args, port, process))
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


if __name__ == "__main__":
    sys.exit(main())
