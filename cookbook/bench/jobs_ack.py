"""Background jobs: how fast `"async": true` is acknowledged while an LLM takes seconds per call, and whether 100
concurrent summaries complete with bounded memory.

The service runs in this process under uvicorn on a loopback port (real HTTP), with an in-process LLM that answers
`summary_task_memory_simple` correctly after `--llm-seconds` (2 s by default), the local store and the hash
embedder. `--jobs` summaries (one trajectory each, one workspace per 4 jobs) are submitted at once with
`"async": true` (after 20 submitted one at a time); the acknowledgements are timed (each is on disk, fsynced,
before it is sent), then every job is awaited with `GET /jobs/{id}?wait=`.

    .venv/bin/python cookbook/bench/jobs_ack.py
    .venv/bin/python cookbook/bench/jobs_ack.py --jobs 100 --llm-seconds 2

Targets (issue #21): ack p50 <= 20 ms; 100 concurrent async summaries complete, RSS bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
import uvicorn
from proc_info import rss_mib

from reme_service.app import ReMeApp
from reme_service.providers.llm.base import LLMClient
from reme_service.schema.messages import Message, Role
from reme_service.server.http import create_http_app
from reme_service.testing.ports import free_port


class SlowLLM(LLMClient):
    backend = "slow"
    model_name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0

    async def chat(self, messages: Sequence[Message], *, tools: Any = None, **settings: Any) -> Message:
        self.calls += 1
        await asyncio.sleep(self.seconds)
        item = {"when_to_use": f"when case {self.calls} comes up", "memory": f"advice {self.calls}"}
        return Message(role=Role.ASSISTANT, content=f"```json\n{json.dumps([item])}\n```")


async def drive(base: str, jobs: int) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=httpx.Limits(max_connections=200)) as client:
        await client.get("/health")

        async def submit(i: int) -> tuple[float, str]:
            body = {
                "workspace_id": f"ws{i // 4}",
                "trajectories": [{"task_id": f"t{i}", "messages": [{"role": "user", "content": f"task {i}"}]}],
                "async": True,
            }
            started = time.perf_counter()
            r = await client.post("/summary_task_memory_simple", json=body)
            assert r.status_code == 202, r.text
            return time.perf_counter() - started, r.json()["job_id"]

        one_by_one = sorted([(await submit(jobs + i))[0] for i in range(20)])  # while the first ones run
        started = time.perf_counter()
        acks = await asyncio.gather(*(submit(i) for i in range(jobs)))
        submitted = time.perf_counter() - started
        latencies = sorted(a for a, _ in acks)
        print(f"ack latency, one at a time: p50 {statistics.median(one_by_one) * 1e3:.1f} ms (target p50 <= 20)")
        peak = rss_mib()
        pending = [job_id for _, job_id in acks]
        done = 0
        while pending:
            r = await client.get(f"/jobs/{pending[0]}", params={"wait": 30})
            if r.json()["status"] in ("done", "failed"):
                done += r.json()["status"] == "done"
                pending.pop(0)
            peak = max(peak, rss_mib())
        total = time.perf_counter() - started
    print(f"{jobs} async submissions acknowledged in {submitted * 1e3:.0f} ms")
    print(
        f"ack latency, {jobs} at once: p50 {statistics.median(latencies) * 1e3:.1f} ms, "
        f"p95 {latencies[int(len(latencies) * 0.95)] * 1e3:.1f} ms, max {latencies[-1] * 1e3:.1f} ms"
    )
    print(f"all finished in {total:.1f} s ({done} done); peak RSS {peak:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--llm-seconds", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reme-jobs-") as tmp:
        llm = SlowLLM(args.llm_seconds)
        app = ReMeApp(f"data_dir={tmp}", "embedding_model.default.backend=hash", env={}, llm_clients={"default": llm})
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(create_http_app(app), port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        print(f"rss before: {rss_mib():.0f} MiB; jobs.workers={app.config.jobs.workers}, LLM {args.llm_seconds:g} s")
        try:
            asyncio.run(drive(f"http://127.0.0.1:{port}", args.jobs))
        finally:
            server.should_exit = True
            thread.join(30)
        print(f"LLM calls: {llm.calls}")


if __name__ == "__main__":
    main()
