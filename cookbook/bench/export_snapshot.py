"""The export's snapshot: how long `GET /workspaces/{id}/export` holds the workspace's lock, and what the whole
export costs, on the in-process stores.

    .venv/bin/python cookbook/bench/export_snapshot.py                          # 100k memories, memory and local
    .venv/bin/python cookbook/bench/export_snapshot.py --size 10000 --backends local

In one process, no HTTP server: the app (hash embedder) on a fresh data directory, a workspace of `--size`
memories (random unit vectors, installed by `replace_workspace`), then `--runs` exports driven straight through the
ASGI app and read as fast as they come. For each run it records how long the workspace's lock was held
(`store.lock` timed from acquired to released; 0 when the export takes no lock, as before the snapshot), the time
to the response's start and to its last byte, and the lines and bytes; it prints the median of the runs, and the
process's peak RSS after the fill and after the exports. Run it on the code before the change (PYTHONPATH naming
that checkout) for the comparison: the script uses nothing the old export lacked.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from store_speed import unit_vectors

from reme_service.app import ReMeApp
from reme_service.schema.vector_node import VectorNode
from reme_service.server.http import create_http_app
from reme_service.stores.base import VectorStore

WORKSPACE = "export_bench"
MIB = 1024 * 1024


def make_nodes(count: int, dim: int, seed: int) -> list[VectorNode]:
    vectors = unit_vectors(count, dim, seed)
    return [
        VectorNode(
            unique_id=f"m{i:07d}",
            workspace_id=WORKSPACE,
            content=f"when the deploy of service {i} fails at step {i % 17}",
            metadata={
                "memory_type": "task",
                "content": f"roll back service {i}, then rerun the checks of step {i % 17} before retrying",
                "time_created": "2026-11-01 10:00:00",
                "time_modified": "2026-11-01 10:00:00",
                "metadata": {"freq": i % 5, "utility": i % 3},
            },
            vector=vectors[i].tolist(),
        )
        for i in range(count)
    ]


def time_the_lock(store: VectorStore, held: list[float]) -> None:
    """Make `store.lock` record, in `held`, how long each section on the bench's workspace held it."""
    original = store.lock

    @contextlib.asynccontextmanager
    async def timed(workspace_id: str) -> AsyncIterator[None]:
        async with original(workspace_id):
            started = time.perf_counter()
            try:
                yield
            finally:
                if workspace_id == WORKSPACE:
                    held.append(time.perf_counter() - started)

    store.lock = timed  # type: ignore[method-assign]


async def export_once(api: Any) -> dict[str, float]:
    """One export through the ASGI app, read as fast as it is sent."""
    path = f"/workspaces/{WORKSPACE}/export"
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"localhost")],
        "client": ("127.0.0.1", 50000),
        "server": ("localhost", 80),
    }
    done = asyncio.Event()
    requested = False
    figures = {"first_byte_s": 0.0, "lines": 0.0, "bytes": 0.0}
    started = time.perf_counter()

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            if message["status"] != 200:
                raise RuntimeError(f"the export answered {message['status']}")
            figures["first_byte_s"] = time.perf_counter() - started
            return
        body = message.get("body", b"")
        figures["lines"] += body.count(b"\n")
        figures["bytes"] += len(body)

    try:
        await api(scope, receive, send)
    finally:
        done.set()
    figures["total_s"] = time.perf_counter() - started
    return figures


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def bench(backend: str, size: int, runs: int, seed: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="export-bench-") as tmp:
        app = ReMeApp(
            f"data_dir={Path(tmp) / 'data'}",
            "embedding_model.default.backend=hash",
            f"vector_store.default.backend={backend}",
            env={},
        )
        async with app:
            assert app.services is not None
            store = app.services.store()
            nodes = make_nodes(size, store.embedder.dimensions, seed)
            await store.replace_workspace(WORKSPACE, nodes)
            del nodes
            filled_rss = peak_rss_mib()
            held: list[float] = []
            time_the_lock(store, held)
            api = create_http_app(app, manage_lifecycle=False)
            results: list[dict[str, float]] = []
            for _ in range(runs):
                figures = await export_once(api)
                if figures["lines"] != size:
                    raise RuntimeError(f"the export held {figures['lines']:.0f} lines, not {size}")
                figures["lock_held_s"] = held.pop() if held else 0.0
                figures_bytes = figures.pop("bytes")
                del figures["lines"]
                results.append(figures)
            return {
                "size": size,
                **{name: statistics.median(r[name] for r in results) for name in results[0]},
                "mib": figures_bytes / MIB,
                "rss_after_fill_mib": filled_rss,
                "rss_peak_mib": peak_rss_mib(),
            }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backends", nargs="+", default=["memory", "local"], choices=["memory", "local"])
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    for backend in args.backends:
        figures = asyncio.run(bench(backend, args.size, args.runs, args.seed))
        print(f"== {backend}")
        for name, value in figures.items():
            print(f"{name:20} {value:,.3f}" if isinstance(value, float) else f"{name:20} {value:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
