"""End-to-end query latency with the local MiniLM embedder: `retrieve_task_memory` over HTTP, cache cold.

Starts the service as a subprocess (`embedding_model.default.backend=local`, `local` store, no LLM), stores
every dialogue turn of one LoCoMo conversation as a memory (the `vector_store` flow's `insert`), then asks each
of its questions once, in order, one request at a time. Every question is a distinct text, so each request runs
the model for its query (the embedder's text → vector cache never answers); the figures are the whole HTTP
round trip as the client sees it. For contrast the same questions are asked a second time (cache warm: the
embedding is skipped and what remains is the service's own cost).

    python cookbook/bench/query_latency.py                                  # ../shared/data/locomo_dev.json
    python cookbook/bench/query_latency.py --conversation 2 --limit 100

Target (issue #17): p50 ≤ 12 ms cold on an idle 2-core machine. Other processes on the cores show up directly
in these figures; the benchmark prints the load average before it starts, and beside the latencies the service
process's CPU time per query (all its threads, from /proc), which stays comparable on busy cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
from locomo_recall import DEFAULT_DATA, memory_of, turns_of
from retrieval_speed import api_key_headers, running_server

from reme_service.testing.percentiles import percentile

TOP_K = 5


def questions_of(sample: dict[str, Any], limit: int) -> list[str]:
    """The conversation's distinct question texts, in order (at most `limit`; 0 = all)."""
    seen: dict[str, None] = {}
    for qa in sample.get("qa", []):
        text = str(qa.get("question", "")).strip()
        if text:
            seen.setdefault(text, None)
    texts = list(seen)
    return texts[:limit] if limit else texts


def timed_queries(client: httpx.Client, workspace: str, queries: Sequence[str]) -> list[float]:
    """Milliseconds per `retrieve_task_memory` request, sorted; raises on a failed answer."""
    samples = []
    for query in queries:
        start = time.perf_counter()
        payload = {"workspace_id": workspace, "query": query, "top_k": TOP_K}
        response = client.post("/retrieve_task_memory", json=payload)
        samples.append((time.perf_counter() - start) * 1000.0)
        body = orjson.loads(response.content)
        if response.status_code != 200 or body.get("success") is not True:
            raise RuntimeError(f"query failed: HTTP {response.status_code} {response.text[:300]}")
    return sorted(samples)


def summary(samples: Sequence[float], server_cpu_s: float) -> dict[str, float]:
    return {
        "requests": len(samples),
        "p50_ms": percentile(samples, 50),
        "p95_ms": percentile(samples, 95),
        "server_cpu_ms": 1000.0 * server_cpu_s / len(samples),  # all threads of the service, per request
    }


def run(
    data_path: Path,
    conversation: int,
    limit: int,
    overrides: Sequence[str],
    timeout: float,
    python: str = sys.executable,
) -> dict[str, Any]:
    """Index one conversation, query its questions cold then warm; the figures as a dict."""
    sample = orjson.loads(data_path.read_bytes())[conversation]
    memories = [memory_of(turn) for turn in turns_of(sample)]
    queries = questions_of(sample, limit)
    settings = ["embedding_model.default.backend=local", "vector_store.default.backend=local", *overrides]
    with (
        tempfile.TemporaryDirectory(prefix="reme-query-latency-") as workdir,
        running_server(python, Path(workdir), settings, timeout) as server,
        httpx.Client(base_url=server.base_url, headers=api_key_headers(), timeout=120.0) as client,
    ):
        workspace = f"locomo_{sample['sample_id']}"
        start = time.perf_counter()
        response = client.post(
            "/vector_store", json={"workspace_id": workspace, "action": "insert", "memory_dicts": memories}
        )
        index_s = time.perf_counter() - start
        if response.status_code != 200 or not response.json().get("success"):
            raise RuntimeError(f"insert failed: HTTP {response.status_code} {response.text[:300]}")
        timed_queries(client, workspace, ["warm-up: load the model and BLAS buffers"])
        cpu_start = server.cpu_seconds()
        cold = timed_queries(client, workspace, queries)
        cpu_cold = server.cpu_seconds()
        warm = timed_queries(client, workspace, queries)
        cpu_warm = server.cpu_seconds()
    return {
        "memories": len(memories),
        "index_s": index_s,
        "cold": summary(cold, cpu_cold - cpu_start),
        "warm": summary(warm, cpu_warm - cpu_cold),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON (default: %(default)s)")
    parser.add_argument("--conversation", type=int, default=0, help="which conversation of the file")
    parser.add_argument("--limit", type=int, default=0, help="at most this many questions (0 = all)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds for the server to start")
    parser.add_argument("overrides", nargs="*", help="extra service settings, key.sub=value")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        parser.error(f"no LoCoMo data at {args.data}")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    result = run(args.data, args.conversation, args.limit, args.overrides, args.timeout)
    print(f"{result['memories']} memories indexed in {result['index_s']:.1f} s")
    for name in ("cold", "warm"):
        row = result[name]
        print(
            f"{name:<5} {row['requests']:>4} queries   p50 {row['p50_ms']:6.2f} ms   p95 {row['p95_ms']:6.2f} ms   "
            f"service CPU {row['server_cpu_ms']:5.2f} ms/query"
        )


if __name__ == "__main__":
    main()
