"""The management API at scale: the workspace list, a listing page of 100 and a full export at 100k memories, with
the server's RSS.

    .venv/bin/python cookbook/bench/manage_api.py                 # 100k memories (about a minute)
    .venv/bin/python cookbook/bench/manage_api.py --size 10000

One service process (local store, hash embedder) loads a synthetic library of `--size` memories
(retrieval_speed's), then: `GET /workspaces` 5 times (the first call, the median of the others, the RSS growth:
each workspace's summary, `VectorStore.summarize`); `GET /workspaces/{id}/memories?limit=100` `--pages` times,
each page at a random spot (the cursor of the page before it) and the first page, sequentially (p50, p95); then
`GET /workspaces/{id}/export` read to its end (memories/s), with the server's RSS sampled every 50 ms while it
streams (before, peak, after).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import retrieval_speed as rs  # noqa: E402

MIB = 1024 * 1024


def listing(server: rs.Server, workspace: str, pages: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    times: list[float] = []
    with httpx.Client(base_url=server.base_url, headers=rs.api_key_headers(), timeout=60) as client:
        cursor: str | None = None
        for _ in range(pages):
            params: dict[str, Any] = {"limit": 100}
            if cursor is not None and rng.random() < 0.9:
                params["cursor"] = cursor
            started = time.perf_counter()
            response = client.get(f"/workspaces/{workspace}/memories", params=params)
            times.append(time.perf_counter() - started)
            response.raise_for_status()
            body = response.json()
            if len(body["memories"]) != 100 and body["next_cursor"] is not None:
                raise RuntimeError("a page that is not the last held fewer than 100 memories")
            cursor = body["next_cursor"]
    ordered = sorted(times)
    return {
        "page_p50_ms": 1000 * statistics.median(ordered),
        "page_p95_ms": 1000 * rs.percentile(ordered, 95),
    }


def workspaces(server: rs.Server, size: int, calls: int = 5) -> dict[str, float]:
    """`GET /workspaces` (what the UI asks first) `calls` times: the first call's time, the median of the others,
    and the server's RSS growth over them (sampled every 20 ms)."""
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            samples.append(server.rss_bytes())

    before = server.rss_bytes()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    times: list[float] = []
    with httpx.Client(base_url=server.base_url, headers=rs.api_key_headers(), timeout=600) as client:
        for _ in range(calls):
            started = time.perf_counter()
            response = client.get("/workspaces")
            times.append(time.perf_counter() - started)
            response.raise_for_status()
            if response.json()["workspaces"][0]["size"] != size:
                raise RuntimeError("the workspace list did not count every memory")
    stop.set()
    sampler.join()
    return {
        "workspaces_first_ms": 1000 * times[0],
        "workspaces_again_ms": 1000 * statistics.median(times[1:]),
        "workspaces_rss_growth_mib": (max([before, *samples]) - before) / MIB,
    }


def export(server: rs.Server, workspace: str, size: int) -> dict[str, float]:
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            samples.append(server.rss_bytes())

    before = server.rss_bytes()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    lines = received = 0
    with httpx.Client(base_url=server.base_url, headers=rs.api_key_headers(), timeout=600) as client:
        started = time.perf_counter()
        with client.stream("GET", f"/workspaces/{workspace}/export") as response:
            response.raise_for_status()
            for chunk in response.iter_bytes():
                received += len(chunk)
                lines += chunk.count(b"\n")
        seconds = time.perf_counter() - started
    stop.set()
    sampler.join()
    if lines != size:
        raise RuntimeError(f"the export held {lines} lines, not {size}")
    return {
        "export_s": seconds,
        "export_per_s": size / seconds,
        "export_mib": received / MIB,
        "rss_before_mib": before / MIB,
        "rss_peak_mib": max([before, *samples]) / MIB,
        "rss_growth_mib": (max([before, *samples]) - before) / MIB,
    }


def bench(python: str, workdir: Path, size: int, pages: int, seed: int, overrides: Sequence[str]) -> dict[str, Any]:
    (workdir / "lib").mkdir(parents=True, exist_ok=True)
    workspace = "manage_bench"
    rs.write_library(workdir / "lib" / f"{workspace}.jsonl", workspace, size, seed)
    server_overrides = ["embedding_model.default.backend=hash", "vector_store.default.backend=local", *overrides]
    with rs.running_server(python, workdir, server_overrides, 120.0) as server:
        load_s, loaded = rs.load_library(server, workspace, 1800.0)
        figures: dict[str, Any] = {"size": loaded, "load_s": load_s}
        figures.update(workspaces(server, loaded))
        figures.update(listing(server, workspace, pages, seed))
        figures.update(export(server, workspace, loaded))
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="manage-bench-") as tmp:
        figures = bench(args.python, Path(tmp), args.size, args.pages, args.seed, [])
    for name, value in figures.items():
        print(f"{name:16} {value:,.2f}" if isinstance(value, float) else f"{name:16} {value:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
