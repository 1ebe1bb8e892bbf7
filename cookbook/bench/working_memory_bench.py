"""Working-memory compaction cost: a 200-message agent conversation of about 100k tokens.

The conversation is deterministic: a system prompt, a user task, 98 assistant tool calls each followed by its tool
result (every tenth result is a ~20k-character log, the others ~2k characters of JSON), a short assistant message
and a last user message — 200 messages, ~400k characters, ~100k tokens by the default heuristic (characters / 4).

Two measurements:

1. **In process** (`ReMeApp.async_execute`, no HTTP): wall time per request of `summary_working_memory` in each
   mode, with the default knobs (so compaction offloads the large results among the older messages), each request
   writing into a fresh `store_dir` (atomic writes: temp file, fsync, rename); the same for
   `summary_working_memory_for_as`, which does the same work but writes nothing; and the peak of Python
   allocations during one request (`tracemalloc`).
2. **Over HTTP**: the service started as a subprocess (hash embedder, no LLM) on a loopback port; request latency
   as the client sees it, server CPU time per request (from /proc/<pid>/stat), and the server's resident memory
   (VmRSS) and peak resident memory (VmHWM) after start-up and after the requests.

    .venv/bin/python cookbook/bench/working_memory_bench.py
    .venv/bin/python cookbook/bench/working_memory_bench.py --runs 50 --modes compact,auto
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from reme_service.app import ReMeApp  # noqa: E402
from reme_service.ops.working.message_io import parse_messages  # noqa: E402
from reme_service.ops.working.token_count import HeuristicTokenCounter  # noqa: E402
from reme_service.testing.ports import free_port  # noqa: E402

FLOW = "summary_working_memory"
FOR_AS = "summary_working_memory_for_as"  # the same work without writing the files
ONLY_FLOW = f'enabled_flows=["{FLOW}","{FOR_AS}"]'  # the other flows play no part here


# ---------------------------------------------------------------------------------------------------- the data


def log_text(rng: random.Random, chars: int) -> str:
    lines: list[str] = []
    total = 0
    while total < chars:
        level = rng.choice(["INFO", "INFO", "INFO", "WARN", "ERROR"])
        line = (
            f"2024-05-14 12:{rng.randrange(60):02d}:{rng.randrange(60):02d},{rng.randrange(1000):03d} {level} "
            f"[worker-{rng.randrange(8)}] order {rng.randrange(10**6)} step {rng.choice(['pay', 'ship', 'bill'])} "
            f"took {rng.randrange(2000)} ms"
        )
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def json_text(rng: random.Random, chars: int) -> str:
    rows: list[dict[str, Any]] = []
    while len(json.dumps(rows)) < chars:
        rows.append(
            {
                "id": rng.randrange(10**6),
                "name": f"item-{rng.randrange(10**4)}",
                "price": round(rng.uniform(1, 500), 2),
                "tags": rng.sample(["a", "b", "c", "d", "e"], 2),
            }
        )
    return json.dumps({"results": rows, "total": len(rows)})


def conversation(seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an operations agent with log and database tools."},
        {"role": "user", "content": "Investigate why orders failed yesterday and summarise the causes."},
    ]
    for step in range(98):
        call_id = f"call_{step:03d}"
        tool = "read_log" if step % 10 == 0 else "query_db"
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {step}: checking the {tool.replace('_', ' ')}.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps({"step": step, "day": "2024-05-14"})},
                    }
                ],
            }
        )
        content = log_text(rng, 20_000) if step % 10 == 0 else json_text(rng, 2_100)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
    messages.append({"role": "assistant", "content": "I have checked every log and table of the day."})
    messages.append({"role": "user", "content": "Now write the summary of the causes."})
    return messages


# ------------------------------------------------------------------------------------------------ in process


async def in_process(messages: list[dict[str, Any]], modes: list[str], runs: int, workdir: Path) -> None:
    print("\n== in process (ReMeApp.async_execute, no HTTP) ==")
    overrides = (f"data_dir={workdir / 'inproc'}", "embedding_model.default.backend=hash", ONLY_FLOW)
    async with ReMeApp(*overrides, env={}) as app:
        for flow, mode in [(FLOW, m) for m in modes] + [(FOR_AS, m) for m in modes]:
            times: list[float] = []
            last: dict[str, Any] = {}
            for run in range(runs + 2):  # two warm-up runs
                started = time.perf_counter()
                last = await app.async_execute(
                    name=flow, messages=messages, working_summary_mode=mode, store_dir=f"{mode}/{run}", chat_id="b"
                )
                if run >= 2:
                    times.append(time.perf_counter() - started)
            assert last["success"], last
            tracemalloc.start()
            tracemalloc.reset_peak()
            await app.async_execute(
                name=flow, messages=messages, working_summary_mode=mode, store_dir=f"{mode}/traced", chat_id="b"
            )
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            summary = last["metadata"]["working_summary"]
            print(
                f"{flow:30s} {mode:9s} applied={summary['applied']:8s} tokens {summary['tokens_before']} -> "
                f"{summary['tokens_after']}, files {len(summary['files'])}; "
                f"p50 {statistics.median(times) * 1e3:.1f} ms, min {min(times) * 1e3:.1f} ms, "
                f"max {max(times) * 1e3:.1f} ms over {runs} runs; peak Python allocations {peak / 2**20:.1f} MiB"
            )


# ----------------------------------------------------------------------------------------------------- HTTP


def proc_status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{key} missing from /proc/{pid}/status")


def cpu_seconds(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def server(workdir: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "reme_service",
        f"http.port={port}",
        "http.host=127.0.0.1",
        f"data_dir={workdir / 'http'}",
        "embedding_model.default.backend=hash",
        "log_level=WARNING",
        ONLY_FLOW,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_LLM")}
    with (workdir / "server.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError((workdir / "server.log").read_text())
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.1)
        yield process, base
    finally:
        process.terminate()
        process.wait(timeout=15)


def over_http(messages: list[dict[str, Any]], modes: list[str], runs: int, workdir: Path) -> None:
    print("\n== over HTTP (service subprocess, hash embedder, no LLM) ==")
    body_bytes = len(json.dumps({"messages": messages}))
    print(f"request body {body_bytes / 2**20:.2f} MiB")
    with server(workdir) as (process, base), httpx.Client(base_url=base, timeout=120) as client:
        pid = process.pid
        print(
            f"after start-up: VmRSS {proc_status(pid, 'VmRSS') / 2**20:.1f} MiB, "
            f"VmHWM {proc_status(pid, 'VmHWM') / 2**20:.1f} MiB"
        )
        for mode in modes:
            latencies: list[float] = []
            cpu_before = cpu_seconds(pid)
            for run in range(runs + 2):
                started = time.perf_counter()
                r = client.post(
                    f"/{FLOW}",
                    json={
                        "messages": messages,
                        "working_summary_mode": mode,
                        "store_dir": f"{mode}/{run}",
                        "chat_id": "bench",
                    },
                )
                elapsed = time.perf_counter() - started
                assert r.status_code == 200 and r.json()["success"], r.text[:500]
                if run == 1:
                    cpu_before = cpu_seconds(pid)
                if run >= 2:
                    latencies.append(elapsed)
            cpu = (cpu_seconds(pid) - cpu_before) / runs
            print(
                f"{mode:9s} latency p50 {statistics.median(latencies) * 1e3:.1f} ms "
                f"(min {min(latencies) * 1e3:.1f}, max {max(latencies) * 1e3:.1f}); server CPU {cpu * 1e3:.1f} ms "
                f"per request; response {len(r.content) / 2**20:.2f} MiB; VmRSS {proc_status(pid, 'VmRSS') / 2**20:.1f}"
                f" MiB, VmHWM {proc_status(pid, 'VmHWM') / 2**20:.1f} MiB"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--modes", default="compact,auto,compress")
    parser.add_argument("--skip-http", action="store_true")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    messages = conversation()
    tokens = HeuristicTokenCounter().count_messages(parse_messages(messages))
    chars = sum(len(m["content"]) for m in messages)
    print(f"{len(messages)} messages, {chars} characters, {tokens} tokens (heuristic)")
    with tempfile.TemporaryDirectory(prefix="wm-bench-") as tmp:
        workdir = Path(tmp)
        asyncio.run(in_process(messages, modes, args.runs, workdir))
        if not args.skip_http:
            over_http(messages, modes, args.runs, workdir)


if __name__ == "__main__":
    main()
