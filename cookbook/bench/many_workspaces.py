"""Many workspaces on one machine: the local store with a RAM budget (`max_resident_mb`), measured on
10,000 workspaces x 100 memories (1,000,000 memories, 384-d vectors) by default.

A child process builds the workspaces (one snapshot each, through `replace_workspace`); this process then opens the
store with the budget and measures, direct store calls, no HTTP:

- cold open: the first search of each workspace in a random order (snapshot read and, when over the budget, the
  least recently used idle workspaces let go), p50/p99;
- warm retrieval: searches of 100 workspaces used just before, p50;
- RSS of this process after every workspace was opened once, against the budget; open file descriptors;
- the store's own estimate of what it holds.

    .venv/bin/python cookbook/bench/many_workspaces.py                      # 10,000 x 100, 1 GiB budget
    .venv/bin/python cookbook/bench/many_workspaces.py --workspaces 1000 --budget-mb 64

Targets (issue #17): RSS <= budget + 300 MiB, cold open p50 <= 20 ms, open FDs <= 256.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from proc_info import rss_mib

from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.inproc.local import LocalVectorStore
from reme_service.stores.params import LocalStoreParams

KINDS = ("task", "personal", "tool")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def store_at(path: Path, budget_mb: float | None, dim: int) -> LocalVectorStore:
    params = LocalStoreParams(store_dir=path, max_resident_mb=budget_mb)
    return LocalVectorStore(params, embedder=HashEmbeddingClient(dimensions=dim))


async def build(path: Path, workspaces: int, per: int, dim: int) -> None:
    store = store_at(path, 64, dim)
    await store.start()
    rng = np.random.default_rng(7)
    started = time.perf_counter()
    for w in range(workspaces):
        vectors = rng.standard_normal((per, dim), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        nodes = [
            VectorNode(
                unique_id=f"w{w}-m{i}",
                content=f"memory {i} of workspace {w}: when the task needs step {i % 7}, do thing {i % 11}",
                vector=vectors[i],
                metadata={"memory_type": KINDS[i % 3], "when_to_use": f"situation {i % 13}"},
            )
            for i in range(per)
        ]
        await store.replace_workspace(f"user-{w}", nodes)
        if (w + 1) % 1000 == 0:
            print(f"  built {w + 1:,} workspaces ({time.perf_counter() - started:.0f} s)", flush=True)
    await store.close()


def ms(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1e3


async def measure(path: Path, workspaces: int, budget_mb: float, dim: int) -> None:
    base_rss = rss_mib()
    store = store_at(path, budget_mb, dim)
    await store.start()
    rng = np.random.default_rng(11)
    query = rng.standard_normal(dim).astype(np.float32)
    query /= np.linalg.norm(query)
    order = list(range(workspaces))
    random.Random(3).shuffle(order)
    cold: list[float] = []
    peak_rss = base_rss
    for n, w in enumerate(order):
        started = time.perf_counter()
        hits = await store.search_vector(f"user-{w}", query, top_k=5)
        cold.append(time.perf_counter() - started)
        assert len(hits) == 5
        if n % 500 == 0:
            peak_rss = max(peak_rss, rss_mib())
    rss_after = rss_mib()
    peak_rss = max(peak_rss, rss_after)
    recent = order[-100:]
    warm: list[float] = []
    for _ in range(5):
        for w in recent:
            started = time.perf_counter()
            await store.search_vector(f"user-{w}", query, top_k=5)
            warm.append(time.perf_counter() - started)
    fds = open_fds()
    print(f"budget {budget_mb:.0f} MiB; RSS before opening {base_rss:.0f} MiB")
    print(f"cold open + search: p50 {ms(cold, 0.5):.2f} ms  p99 {ms(cold, 0.99):.2f} ms   (target p50 <= 20 ms)")
    print(f"warm search (100 recent workspaces): p50 {ms(warm, 0.5):.3f} ms  p99 {ms(warm, 0.99):.3f} ms")
    growth = peak_rss - base_rss
    print(
        f"RSS after opening all {workspaces:,}: {rss_after:.0f} MiB (peak {peak_rss:.0f}; growth {growth:.0f} MiB; "
        f"target <= budget + 300 = {budget_mb + 300:.0f})"
    )
    print(
        f"resident workspaces {store.resident_workspaces():,}, estimated {store.files.resident.total / 2**20:.0f} MiB, "
        f"let go {store.files.evictions:,} times"
    )
    print(f"open file descriptors: {fds} (target <= 256)")
    await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workspaces", type=int, default=10_000)
    parser.add_argument("--per-workspace", type=int, default=100)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--budget-mb", type=float, default=1024)
    parser.add_argument("--dir", type=Path, help="reuse (or keep) the built store here")
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_only:
        asyncio.run(build(args.dir, args.workspaces, args.per_workspace, args.dim))
        return
    with tempfile.TemporaryDirectory(prefix="reme-many-") as tmp:
        path = args.dir or Path(tmp) / "vs"
        if not path.is_dir():
            total = args.workspaces * args.per_workspace
            print(f"building {args.workspaces:,} workspaces x {args.per_workspace} = {total:,} memories in {path}")
            started = time.perf_counter()
            command = [sys.executable, __file__, "--build-only", "--dir", str(path)]
            command += ["--workspaces", str(args.workspaces), "--per-workspace", str(args.per_workspace)]
            subprocess.run([*command, "--dim", str(args.dim)], check=True)
            print(f"built in {time.perf_counter() - started:.0f} s")
        asyncio.run(measure(path, args.workspaces, args.budget_mb, args.dim))


if __name__ == "__main__":
    main()
