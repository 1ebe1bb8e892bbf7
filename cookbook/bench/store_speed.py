"""Vector-store speed: search latency, upsert throughput, and (local) snapshot write and cold load times.

Direct store calls, no HTTP. Vectors are random, L2-normalised, 384-d by default.

    .venv/bin/python cookbook/bench/store_speed.py --sizes 10000 100000

Targets: search p50 <= 1 ms at 10k nodes and <= 10 ms at 100k.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.base import VectorStore
from reme_service.stores.inproc.local import LocalVectorStore
from reme_service.stores.inproc.memory import MemoryVectorStore
from reme_service.stores.params import LocalStoreParams
from reme_service.testing.percentiles import percentile

WS = "bench"
KINDS = ("task", "personal", "tool", "summary")


def unit_vectors(count: int, dim: int, seed: int) -> np.ndarray:
    """`count` random unit vectors of `dim` float32s (the benches' stand-in for embeddings)."""
    vectors = np.random.default_rng(seed).standard_normal((count, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def make_nodes(count: int, dim: int, seed: int) -> list[VectorNode]:
    vectors = unit_vectors(count, dim, seed)
    return [
        VectorNode(
            unique_id=f"n{i}",
            content=f"memory number {i}",
            vector=vectors[i],
            metadata={"memory_type": KINDS[i % 4], "metadata": {"freq": i % 10}},
        )
        for i in range(count)
    ]


def percentiles(samples: list[float]) -> str:
    p50, p95 = percentile(samples, 50) * 1e3, percentile(samples, 95) * 1e3
    return f"p50 {p50:7.3f} ms   p95 {p95:7.3f} ms"


async def fill(store: VectorStore, nodes: list[VectorNode], batch: int) -> float:
    start = time.perf_counter()
    for offset in range(0, len(nodes), batch):
        await store.upsert(WS, nodes[offset : offset + batch])
    return len(nodes) / (time.perf_counter() - start)


async def search_latency(store: VectorStore, queries: np.ndarray, top_k: int, filter: dict | None) -> list[float]:
    samples = []
    for query in queries:
        start = time.perf_counter()
        hits = await store.search_vector(WS, query, top_k=top_k, filter=filter)
        samples.append(time.perf_counter() - start)
        assert len(hits) == top_k
    return samples


async def bench_size(args: argparse.Namespace, count: int, store_dir: Path) -> None:
    embedder = HashEmbeddingClient(dimensions=args.dim)
    nodes = make_nodes(count, args.dim, seed=count)
    queries = np.random.default_rng(1).standard_normal((args.queries, args.dim), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    print(f"\n== {count:,} nodes x {args.dim}-d ==")

    if "memory" in args.backends:
        memory = MemoryVectorStore(embedder=embedder)
        rate = await fill(memory, nodes, args.batch)
        print(f"memory  upsert      {rate:12,.0f} nodes/s (batches of {args.batch})")
        print(f"memory  search      {percentiles(await search_latency(memory, queries, args.top_k, None))}")
        filtered = await search_latency(memory, queries, args.top_k, {"metadata.memory_type": "task"})
        print(f"memory  search+flt  {percentiles(filtered)}   (filter keeps 1/4)")
        start = time.perf_counter()
        listed = await memory.list_nodes(WS)
        print(f"memory  list_nodes  {(time.perf_counter() - start) * 1e3:9.1f} ms for {len(listed):,} nodes")
        await memory.close()

    if "local" in args.backends:
        directory = store_dir / f"n{count}"
        local = LocalVectorStore(
            LocalStoreParams(store_dir=directory, compact_after_records=1_000_000), embedder=embedder
        )
        await local.start()
        rate = await fill(local, nodes, args.batch)
        print(f"local   upsert      {rate:12,.0f} nodes/s (batches of {args.batch}, fsync per batch)")
        start = time.perf_counter()
        await local.compact(WS)
        print(f"local   snapshot    {(time.perf_counter() - start) * 1e3:9.1f} ms write (temp + fsync + rename)")
        size = (directory / f"{WS}.snap").stat().st_size
        await local.close()

        cold = LocalVectorStore(LocalStoreParams(store_dir=directory), embedder=embedder)
        start = time.perf_counter()
        await cold.get(WS, ["n0"])  # the first access loads the workspace
        print(f"local   cold load   {(time.perf_counter() - start) * 1e3:9.1f} ms ({size / 2**20:.1f} MiB snapshot)")
        print(f"local   search      {percentiles(await search_latency(cold, queries, args.top_k, None))}")
        await cold.close()


async def main(args: argparse.Namespace) -> None:
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (busy cores slow every figure)")
    with tempfile.TemporaryDirectory(prefix="store-speed-", dir=args.dir) as tmp:
        for count in args.sizes:
            await bench_size(args, count, Path(tmp))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="node counts")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--batch", type=int, default=1_000, help="nodes per upsert call")
    parser.add_argument("--backends", nargs="+", choices=["memory", "local"], default=["memory", "local"])
    parser.add_argument("--dir", default=None, help="where the local store's files go (default: system temp)")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
