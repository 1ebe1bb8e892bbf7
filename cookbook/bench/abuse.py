"""Availability under abuse: how the service answers its other clients while one client misbehaves.

Starts the service as a subprocess on a free loopback port (hash embedder, local store, no LLM; the server from
retrieval_speed.py), then measures, each beside the same figure on a quiet server:

1. `/health` p50/p99 (and failures) while `--idle` raw TCP connections are held open, half of them silent and half
   stopped in the middle of a request head;
2. `/health` p50/p99 while one client runs a catastrophic-backtracking regex through `grep_working_memory`
   (`(a|a)+$` on a line of `--bomb-length` a's and a '!'), and how that request ends (status and seconds);
3. `retrieve_task_memory` p50/p99 on workspace B while a `--load-size` memory library loads into workspace A;
4. the server's open file descriptors (from /proc) after `--workspaces` new workspaces got one memory each, and
   how many of those writes failed;
5. the attacks of issue #37 (`hostile_clients.py`), each beside `/health` p99 and, on a server with keys, another
   key's `retrieve_task_memory` p99: `--trickle` keyless trickled bodies, `--huge` keyless 30 MiB bodies at once
   (to `POST /health` and to a flow; the RSS growth), key A holding `--streams` MCP streams, event streams and
   long polls, key A's `--bombs` regex bombs (and key B's grep meanwhile), key A's trickled bodies.

Every request is loopback only, bounded in count and time, and the script stops by itself.

    .venv/bin/python cookbook/bench/abuse.py
    .venv/bin/python cookbook/bench/abuse.py --idle 300 --load-size 10000 --workspaces 2000 --json out.json
    .venv/bin/python cookbook/bench/abuse.py --only-hostile --trickle 1100 --huge 30 --streams 300 --bombs 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import retrieval_speed as rs  # noqa: E402

QUIET_REQUESTS = 300


@dataclass
class Figure:
    """Latency samples of one scenario, and what went wrong."""

    name: str
    samples: list[float] = field(default_factory=list)
    failures: int = 0
    note: str = ""

    def row(self) -> dict[str, Any]:
        ordered = sorted(self.samples)
        return {
            "scenario": self.name,
            "requests": len(self.samples) + self.failures,
            "p50_ms": round(rs.percentile(ordered, 50) * 1e3, 2),
            "p99_ms": round(rs.percentile(ordered, 99) * 1e3, 2),
            "max_ms": round(ordered[-1] * 1e3, 2) if ordered else float("nan"),
            "failures": self.failures,
            "note": self.note,
        }


def probe(
    client: httpx.Client, figure: Figure, send: Callable[[httpx.Client], httpx.Response], *, until: Callable[[], bool]
) -> None:
    """Send requests one after another until `until()` holds (at most 2,000), recording latency and failures."""
    for _ in range(2_000):
        if until():
            return
        started = time.perf_counter()
        try:
            response = send(client)
            ok = response.status_code == 200
        except httpx.HTTPError:
            ok = False
        if ok:
            figure.samples.append(time.perf_counter() - started)
        else:
            figure.failures += 1


def health(client: httpx.Client) -> httpx.Response:
    return client.get("/health")


def quiet_health(server: rs.Server) -> Figure:
    figure = Figure("/health, quiet")
    count = iter(range(QUIET_REQUESTS + 1))
    with httpx.Client(base_url=server.base_url, timeout=10.0) as client:
        probe(client, figure, health, until=lambda: next(count) >= QUIET_REQUESTS)
    return figure


def idle_sockets(server: rs.Server, count: int, seconds: float) -> Figure:
    """Hold `count` connections (half silent, half with half a request head) while probing /health."""
    figure = Figure(f"/health, {count} idle sockets held")
    held: list[socket.socket] = []
    try:
        for index in range(count):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            if index % 2:
                sock.sendall(b"POST /retrieve_task_memory HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-")
            held.append(sock)
        deadline = time.monotonic() + seconds
        with httpx.Client(base_url=server.base_url, timeout=5.0) as client:
            probe(client, figure, health, until=lambda: time.monotonic() > deadline)
        time.sleep(max(0.0, deadline - time.monotonic()))  # hold them the whole time, however soon the probe ended
        closed = 0
        for sock in held:
            sock.setblocking(False)
            try:
                closed += sock.recv(1) == b""
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        figure.note = f"{closed} of {count} held sockets closed by the server after {seconds:.0f} s"
    finally:
        for sock in held:
            sock.close()
    return figure


def regex_bomb(server: rs.Server, length: int, seconds: float) -> Figure:
    """Probe /health while one `grep_working_memory` call runs `(a|a)+$` on `a * length + '!'`."""
    figure = Figure(f"/health, regex bomb ({length} chars)")
    root = server.workdir / "data" / "working_memory"
    root.mkdir(parents=True, exist_ok=True)
    (root / "bomb.txt").write_text("a" * length + "!\n", encoding="utf-8")
    outcome: dict[str, Any] = {}

    def bomb() -> None:
        started = time.perf_counter()
        payload = {"file_path": "bomb.txt", "pattern": "(a|a)+$"}  # exponential backtracking in re and regex alike
        try:
            with httpx.Client(base_url=server.base_url, timeout=seconds + 60) as client:
                response = client.post("/grep_working_memory", json=payload)
            outcome["status"] = response.status_code
        except httpx.HTTPError as exc:
            outcome["status"] = type(exc).__name__
        outcome["seconds"] = time.perf_counter() - started

    thread = threading.Thread(target=bomb, daemon=True)
    thread.start()
    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=server.base_url, timeout=10.0) as client:
        probe(client, figure, health, until=lambda: not thread.is_alive() or time.monotonic() > deadline)
    thread.join(timeout=seconds + 60)
    if "seconds" in outcome:
        figure.note = f"the bomb answered {outcome['status']} after {outcome['seconds']:.2f} s"
    else:
        figure.note = "the bomb had not answered when the probe stopped"
    return figure


def query_during_load(server: rs.Server, size: int, seed: int) -> tuple[Figure, Figure]:
    """retrieve_task_memory on workspace B, quiet and while a `size`-memory library loads into workspace A."""
    rs.write_library(server.workdir / "lib" / "bench_b.jsonl", "bench_b", 1_000, seed)
    rs.write_library(server.workdir / "lib" / "bench_a.jsonl", "bench_a", size, seed + 1)
    rs.load_library(server, "bench_b", timeout=600)
    # every request a new text (the tag makes it unique), so each one embeds its query: a repeated text would be
    # answered from the embedder's cache and measure nothing of the embedding lane
    queries = rs.make_queries(200, seed)
    position = iter(range(10**9))

    def query(client: httpx.Client) -> httpx.Response:
        index = next(position)
        text = f"{queries[index % len(queries)]} (probe {index})"
        return client.post("/retrieve_task_memory", json={"workspace_id": "bench_b", "query": text, "top_k": 3})

    quiet = Figure("retrieve_task_memory, quiet")
    count = iter(range(QUIET_REQUESTS + 1))
    with httpx.Client(base_url=server.base_url, timeout=30.0) as client:
        probe(client, quiet, query, until=lambda: next(count) >= QUIET_REQUESTS)
    loading = Figure(f"retrieve_task_memory, {size:,}-memory load running")
    outcome: dict[str, Any] = {}

    def load() -> None:
        try:
            outcome["seconds"], outcome["size"] = rs.load_library(server, "bench_a", timeout=900)
        except RuntimeError as exc:
            outcome["error"] = str(exc)[:200]

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    with httpx.Client(base_url=server.base_url, timeout=60.0) as client:
        probe(client, loading, query, until=lambda: not thread.is_alive())
    thread.join()
    loading.note = (
        f"load took {outcome['seconds']:.2f} s" if "seconds" in outcome else f"load failed: {outcome.get('error')}"
    )
    return quiet, loading


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def _write_workspaces(base_url: str, count: int) -> int:
    failures = 0
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0) as client:
        gate = asyncio.Semaphore(16)

        async def one(index: int) -> bool:
            memory = {"when_to_use": f"workspace {index}", "content": f"memory of workspace {index}"}
            payload = {"workspace_id": f"fd_{index}", "action": "insert", "memory_dicts": [memory]}
            async with gate:
                try:
                    response = await client.post("/vector_store", json=payload)
                except httpx.HTTPError:
                    return False
            return response.status_code == 200 and bool(response.json().get("success"))

        for ok in await asyncio.gather(*(one(i) for i in range(count))):
            failures += not ok
    return failures


def many_workspaces(server: rs.Server, count: int) -> dict[str, Any]:
    before = open_fds(server.pid)
    started = time.perf_counter()
    failures = asyncio.run(_write_workspaces(server.base_url, count))
    return {
        "workspaces": count,
        "failed_writes": failures,
        "open_fds_before": before,
        "open_fds_after": open_fds(server.pid),
        "seconds": round(time.perf_counter() - started, 2),
    }


def print_rows(rows: Sequence[dict[str, Any]], workspaces: dict[str, Any]) -> None:
    print()
    print(f"{'scenario':48} {'requests':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>9} {'fail':>5}  note")
    print("-" * 110)
    for row in rows:
        print(
            f"{row['scenario']:48} {row['requests']:>8} {row['p50_ms']:>8} {row['p99_ms']:>8} {row['max_ms']:>9} "
            f"{row['failures']:>5}  {row['note']}"
        )
    if not workspaces:
        return
    print()
    print(
        f"{workspaces['workspaces']:,} new workspaces, one memory each: {workspaces['failed_writes']} failed writes; "
        f"server FDs {workspaces['open_fds_before']} before, {workspaces['open_fds_after']} after "
        f"({workspaces['seconds']} s)"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=rs.positive_int, default=300, help="idle sockets to hold (default 300)")
    parser.add_argument("--idle-seconds", type=float, default=15.0, help="how long to hold them (default 15)")
    parser.add_argument("--bomb-length", type=rs.positive_int, default=27, help="regex bomb line length (27)")
    parser.add_argument("--bomb-seconds", type=float, default=30.0, help="longest probe during the bomb (30)")
    parser.add_argument("--load-size", type=rs.positive_int, default=10_000, help="library loaded meanwhile")
    parser.add_argument("--workspaces", type=rs.positive_int, default=2_000, help="new workspaces to write")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--trickle", type=int, default=1_100, help="keyless trickled bodies (1,100; 0: skip #37)")
    parser.add_argument("--huge", type=int, default=30, help="keyless 30 MiB bodies at once (30)")
    parser.add_argument("--streams", type=int, default=300, help="streams / long polls key A holds (300)")
    parser.add_argument("--bombs", type=int, default=60, help="regex bombs key A sends at once (60)")
    parser.add_argument("--hostile-seconds", type=float, default=10.0, help="probing time per attack (10)")
    parser.add_argument("--only-hostile", action="store_true", help="run only the attacks of #37")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs the service")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("overrides", nargs="*", help="extra key=value settings for the service")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    overrides = ["embedding_model.default.backend=hash", "vector_store.default.backend=local", *args.overrides]
    figures: list[Figure] = []
    workspaces: dict[str, Any] = {}
    if not args.only_hostile:
        figures, workspaces = classic(args, overrides)
    if args.trickle:
        import hostile_clients  # noqa: PLC0415  (it imports this module)

        figures += hostile_clients.run_all(args, overrides)
    rows = [figure.row() for figure in figures]
    print_rows(rows, workspaces)
    if args.json:
        args.json.write_text(json.dumps({"scenarios": rows, "workspaces": workspaces}, indent=2), encoding="utf-8")
    failed = any(figure.failures for figure in figures) or workspaces.get("failed_writes", 0) > 0
    return 1 if failed else 0


def classic(args: argparse.Namespace, overrides: list[str]) -> tuple[list[Figure], dict[str, Any]]:
    """Scenarios 1-4 of the module doc."""
    with (
        tempfile.TemporaryDirectory(prefix="reme-abuse-") as tmp,
        rs.running_server(args.python, Path(tmp), overrides, timeout=120) as server,
    ):
        figures = [quiet_health(server)]
        print("idle sockets ...", flush=True)
        figures.append(idle_sockets(server, args.idle, args.idle_seconds))
        print("regex bomb ...", flush=True)
        figures.append(regex_bomb(server, args.bomb_length, args.bomb_seconds))
        print(f"query during a {args.load_size:,}-memory load ...", flush=True)
        figures.extend(query_during_load(server, args.load_size, args.seed))
        print(f"{args.workspaces:,} workspaces ...", flush=True)
        workspaces = many_workspaces(server, args.workspaces)
    return figures, workspaces


if __name__ == "__main__":
    raise SystemExit(main())
