"""End-to-end retrieval speed over real HTTP: library load time, sequential latency, concurrent throughput, RSS.

Starts the service as a subprocess on a free loopback port (hash embedder, so no model and no network), then for
each library size N:

1. writes a deterministic synthetic library of N task memories to `<tmp>/lib/bench_<N>.jsonl` and loads it with
   `POST /vector_store {"action": "load"}` (timed; the server's cwd is `<tmp>`, so the relative path is allowed);
2. reads the server's VmRSS from `/proc/<pid>/status` (compare with the raw float32 vectors, N x 384 x 4 bytes);
3. sends `--requests` sequential `POST /retrieve_task_memory` (top_k 3) over one keep-alive connection, after 20
   warm-up requests, and reports p50/p95/p99;
4. runs `--concurrency` async clients for `--duration` seconds and reports requests/s and latency under load.

Every response must be `success: true` with exactly 3 memories. The client runs on the same machine, so the
server and client CPU shares are printed too (on 2 cores a Python client can be the throughput bottleneck).
The server inherits this process's environment: on a small, busy machine compare with `OPENBLAS_NUM_THREADS=1`
(a multi-threaded OpenBLAS matrix-vector product stalls when a core is taken by another process).

    .venv/bin/python cookbook/bench/retrieval_speed.py
    .venv/bin/python cookbook/bench/retrieval_speed.py --sizes 1000,10000 --store memory --json out.json
    .venv/bin/python cookbook/bench/retrieval_speed.py --sizes 10000 log_level=WARNING

Targets: p50 <= 3 ms and >= 400 req/s at 10k, p50 <= 25 ms at 100k, 10k loaded in <= 2 s.
ReMe 0.2.0.6 on the same machine: p50 75 ms at 1k, 810 ms at 10k, 1.5 req/s at 10k, 12.9 s to load 10k.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson

from reme_service.testing.percentiles import percentile
from reme_service.testing.ports import free_port

DIM = 384  # the hash embedder's default dimensions
TOP_K = 3
WARMUP_REQUESTS = 20
FLOW = "/retrieve_task_memory"

# A store choice is a list of `key=value` overrides for the service command line.
STORE_OVERRIDES: dict[str, list[str]] = {
    "local": ["vector_store.default.backend=local"],
    "memory": ["vector_store.default.backend=memory"],
    # a real `chroma run` server started beside the service (see running_chroma); its host/port are added then
    "chroma": ["vector_store.default.backend=chroma"],
}
BASE_OVERRIDES = ["embedding_model.default.backend=hash"]

# ----------------------------------------------------------------------------------------------------------------
# Synthetic library
# ----------------------------------------------------------------------------------------------------------------

ACTIONS = (
    "debugging", "deploying", "refactoring", "profiling", "migrating", "testing", "configuring", "optimising",
    "documenting", "reviewing", "monitoring", "scaling", "securing", "packaging", "benchmarking", "indexing",
    "caching", "parsing", "validating", "upgrading",
)  # fmt: skip
OBJECTS = (
    "a flaky integration test", "the postgres schema", "a kubernetes deployment", "the react dashboard",
    "a rust crate", "the payment webhook", "an airflow dag", "the search index", "a docker image",
    "the auth middleware", "a pandas pipeline", "the grpc gateway", "an s3 bucket policy", "the terraform module",
    "a websocket server", "the csv importer", "a redis cluster", "the pdf generator", "an llm prompt",
    "the ci workflow",
)  # fmt: skip
CONTEXTS = (
    "after a dependency upgrade", "under heavy load", "on a fresh laptop", "before a release", "in production",
    "when memory is tight", "with a strict deadline", "for a new customer", "across three regions",
    "behind a corporate proxy", "on arm64 hosts", "with partial test coverage", "during an incident",
    "for a legacy codebase", "in a monorepo", "with flaky network access",
)  # fmt: skip
CONSTRAINTS = (
    "without downtime", "while keeping backwards compatibility", "using only the standard library",
    "at minimal cost", "so that logs stay readable", "when retries are allowed", "if the api rate limits",
    "keeping tail latency low", "with reproducible builds", "without root access",
)  # fmt: skip
TOOLS = (
    "pytest", "bash", "make", "git bisect", "strace", "perf", "curl", "jq", "sqlite", "docker compose", "helm",
    "cProfile",
)  # fmt: skip
STEPS = (
    "read the error carefully", "reproduce it locally", "pin the failing version", "add a regression test",
    "check the configuration diff", "roll back the last change", "bisect the history", "enable debug logging",
    "compare with a known good run", "write down the root cause", "split the work into small batches",
    "measure before changing anything",
)  # fmt: skip
WHEN_TEMPLATES = (
    "When {action} {object} {context} {constraint}.",
    "Use this when {action} {object} {context}, {constraint}, with {tool}.",
    "Applies to {action} {object} {constraint} {context}.",
    "Helpful for {action} {object} with {tool} {context}.",
)
QUERY_TEMPLATES = (
    "how do I go about {action} {object} {context}",
    "{action} {object} {constraint}",
    "I need help {action} {object} with {tool} {context}",
    "best approach to {action} {object} {context} {constraint}",
)
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def _slots(rng: random.Random) -> dict[str, str]:
    return {
        "action": rng.choice(ACTIONS),
        "object": rng.choice(OBJECTS),
        "context": rng.choice(CONTEXTS),
        "constraint": rng.choice(CONSTRAINTS),
        "tool": rng.choice(TOOLS),
    }


def make_memory(rng: random.Random, workspace_id: str, index: int, base_time: datetime) -> dict[str, Any]:
    """One task-memory dict in the memory-library line format. `content` is unique (it names `index`)."""
    slots = _slots(rng)
    steps = rng.sample(STEPS, 3)
    stamp = (base_time + timedelta(seconds=index)).strftime(TIME_FORMAT)
    return {
        "workspace_id": workspace_id,
        "memory_id": f"{rng.getrandbits(128):032x}",
        "memory_type": "task",
        "when_to_use": rng.choice(WHEN_TEMPLATES).format(**slots),
        "content": (
            f"Experience #{index}: for {slots['action']} {slots['object']}, first {steps[0]}, then {steps[1]}, "
            f"and finally {steps[2]}; {slots['tool']} made it quick."
        ),
        "score": round(rng.random(), 3),
        "time_created": stamp,
        "time_modified": stamp,
        "author": f"bench-agent-{index % 7}",
        "metadata": {"tags": [slots["action"], slots["tool"]], "source": "retrieval_speed", "n": index},
    }


def write_library(path: Path, workspace_id: str, count: int, seed: int) -> None:
    rng = random.Random(f"{seed}:{count}")
    base_time = datetime(2025, 1, 1, 9, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        for index in range(count):
            handle.write(orjson.dumps(make_memory(rng, workspace_id, index, base_time)) + b"\n")


def make_queries(count: int, seed: int) -> list[str]:
    rng = random.Random(f"query:{seed}")
    return [rng.choice(QUERY_TEMPLATES).format(**_slots(rng)) for _ in range(count)]


# ----------------------------------------------------------------------------------------------------------------
# The server subprocess
# ----------------------------------------------------------------------------------------------------------------


def api_key_headers() -> dict[str, str]:
    """`Authorization: Bearer $REME_API_KEY` when that is set (a server that requires keys), else nothing."""
    key = os.environ.get("REME_API_KEY", "")
    return {"Authorization": f"Bearer {key}"} if key else {}


class Server:
    """`python -m reme_service ...` in `workdir` on a free loopback port; its output goes to `workdir/server.log`."""

    def __init__(self, python: str, workdir: Path, overrides: Sequence[str]) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.workdir = workdir
        self.log_path = workdir / "server.log"
        self.command = [
            python,
            "-m",
            "reme_service",
            f"http.port={self.port}",
            "http.host=127.0.0.1",
            f"data_dir={workdir / 'data'}",
            f'file_roots=["{workdir}"]',  # the benches write their libraries to <workdir>/lib
            *overrides,
        ]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, timeout: float) -> float:
        """Start and wait until `GET /health` answers 200; returns the seconds that took."""
        started = time.perf_counter()
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.command, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = started + timeout
        with httpx.Client(base_url=self.base_url, timeout=2.0) as client:
            while time.perf_counter() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the server exited with code {self.process.returncode}:\n{self.log_tail()}")
                try:
                    if client.get("/health").status_code == 200:
                        return time.perf_counter() - started
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        raise RuntimeError(f"the server did not answer /health within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def rss_bytes(self) -> int:
        """VmRSS of the server process, from /proc/<pid>/status."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("VmRSS not found in /proc status")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process (all threads), from /proc/<pid>/stat."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()  # skip "pid (comm) "; utime and stime are fields 14, 15
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def running_server(python: str, workdir: Path, overrides: Sequence[str], timeout: float) -> Iterator[Server]:
    server = Server(python, workdir, overrides)
    try:
        startup = server.start(timeout)
        print(f"server pid {server.pid} on {server.base_url} ready in {startup:.2f} s (log: {server.log_path})")
        yield server
    finally:
        server.stop()


# ----------------------------------------------------------------------------------------------------------------
# Measurements
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class SizeResult:
    size: int
    generate_s: float = 0.0
    load_s: float = 0.0
    loaded: int = 0
    rss_mib: float = 0.0
    rss_delta_mib: float = 0.0
    vectors_mib: float = 0.0
    seq_requests: int = 0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    mean_ms: float = 0.0
    concurrency: int = 0
    load_requests: int = 0
    req_per_s: float = 0.0
    load_p50_ms: float = 0.0
    load_p99_ms: float = 0.0
    server_cpu: float = 0.0  # CPU-seconds per wall second during the throughput run (1.0 = one core)
    client_cpu: float = 0.0
    failures: list[str] = field(default_factory=list)


def check_response(response: httpx.Response) -> str | None:
    """None when the response is a success with exactly TOP_K memories, else what is wrong."""
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {response.text[:200]}"
    body = orjson.loads(response.content)
    if body.get("success") is not True:
        return f"success is not true: {str(body)[:200]}"
    found = len(body.get("metadata", {}).get("memory_list", []))
    return None if found == TOP_K else f"{found} memories instead of {TOP_K}"


def load_library(server: Server, workspace_id: str, timeout: float) -> tuple[float, int]:
    """POST the load action; returns (seconds, loaded size)."""
    payload = {"workspace_id": workspace_id, "action": "load", "path": "lib"}
    with httpx.Client(base_url=server.base_url, headers=api_key_headers(), timeout=timeout) as client:
        start = time.perf_counter()
        response = client.post("/vector_store", json=payload)
        elapsed = time.perf_counter() - start
    body = response.json()
    if response.status_code != 200 or not body.get("success"):
        raise RuntimeError(f"load of {workspace_id} failed: HTTP {response.status_code} {str(body)[:300]}")
    return elapsed, int(body["metadata"]["action_result"]["size"])


def sequential(server: Server, workspace_id: str, queries: Sequence[str], requests: int, result: SizeResult) -> None:
    samples: list[float] = []
    with httpx.Client(base_url=server.base_url, headers=api_key_headers(), timeout=60.0) as client:
        for i in range(WARMUP_REQUESTS + requests):
            payload = {"workspace_id": workspace_id, "query": queries[i % len(queries)], "top_k": TOP_K}
            start = time.perf_counter()
            response = client.post(FLOW, json=payload)
            elapsed = time.perf_counter() - start
            problem = check_response(response)
            if problem and len(result.failures) < 20:
                result.failures.append(f"sequential #{i}: {problem}")
            if i >= WARMUP_REQUESTS:
                samples.append(elapsed)
    samples.sort()
    result.seq_requests = len(samples)
    result.p50_ms = percentile(samples, 50) * 1e3
    result.p95_ms = percentile(samples, 95) * 1e3
    result.p99_ms = percentile(samples, 99) * 1e3
    result.mean_ms = sum(samples) / len(samples) * 1e3


async def _throughput(
    server: Server, workspace_id: str, queries: Sequence[str], concurrency: int, duration: float, result: SizeResult
) -> None:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    samples: list[float] = []
    failures: list[str] = []

    async def one(client: httpx.AsyncClient, query: str) -> float:
        payload = {"workspace_id": workspace_id, "query": query, "top_k": TOP_K}
        start = time.perf_counter()
        response = await client.post(FLOW, json=payload)
        elapsed = time.perf_counter() - start
        problem = check_response(response)
        if problem and len(failures) < 20:
            failures.append(f"throughput: {problem}")
        return elapsed

    async def worker(client: httpx.AsyncClient, index: int, deadline: float) -> None:
        while time.perf_counter() < deadline:
            samples.append(await one(client, queries[index % len(queries)]))
            index += concurrency

    async with httpx.AsyncClient(
        base_url=server.base_url, headers=api_key_headers(), limits=limits, timeout=60.0
    ) as client:
        await asyncio.gather(*(one(client, queries[i % len(queries)]) for i in range(concurrency)))  # open sockets
        server_cpu, client_cpu = server.cpu_seconds(), time.process_time()
        start = time.perf_counter()
        await asyncio.gather(*(worker(client, i, start + duration) for i in range(concurrency)))
        elapsed = time.perf_counter() - start
        result.server_cpu = (server.cpu_seconds() - server_cpu) / elapsed
        result.client_cpu = (time.process_time() - client_cpu) / elapsed
    samples.sort()
    result.concurrency = concurrency
    result.load_requests = len(samples)
    result.req_per_s = len(samples) / elapsed
    result.load_p50_ms = percentile(samples, 50) * 1e3
    result.load_p99_ms = percentile(samples, 99) * 1e3
    result.failures.extend(failures)


def bench_size(server: Server, args: argparse.Namespace, size: int, queries: Sequence[str]) -> SizeResult:
    result = SizeResult(size=size, vectors_mib=size * DIM * 4 / 2**20)
    workspace_id = f"bench_{size}"
    start = time.perf_counter()
    write_library(server.workdir / "lib" / f"{workspace_id}.jsonl", workspace_id, size, args.seed)
    result.generate_s = time.perf_counter() - start
    print(f"\n== {size:,} memories: library written in {result.generate_s:.2f} s; loading ...", flush=True)

    rss_before = server.rss_bytes()
    result.load_s, result.loaded = load_library(server, workspace_id, args.load_timeout)
    if result.loaded != size:
        result.failures.append(f"load reported size {result.loaded}, expected {size}")
    rss = server.rss_bytes()
    result.rss_mib, result.rss_delta_mib = rss / 2**20, (rss - rss_before) / 2**20
    print(f"   loaded in {result.load_s:.2f} s; RSS {result.rss_mib:.0f} MiB (+{result.rss_delta_mib:.0f} MiB)")

    sequential(server, workspace_id, queries, args.requests, result)
    print(f"   sequential: p50 {result.p50_ms:.2f} ms, p95 {result.p95_ms:.2f} ms, p99 {result.p99_ms:.2f} ms")
    asyncio.run(_throughput(server, workspace_id, queries, args.concurrency, args.duration, result))
    print(f"   {args.concurrency} clients: {result.req_per_s:.0f} req/s, p50 {result.load_p50_ms:.2f} ms", flush=True)
    for failure in result.failures[:5]:
        print(f"   FAILURE {failure}")
    return result


# ----------------------------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    label: str
    size: int
    metric: str  # a SizeResult field
    unit: str
    goal: float | None  # None: no target, reference only
    higher_is_better: bool = False
    reme: float | None = None  # ReMe 0.2.0.6 on the same machine

    def verdict(self, value: float) -> str:
        if self.goal is None:
            return "-"
        ok = value >= self.goal if self.higher_is_better else value <= self.goal
        return "ok" if ok else "MISS"


TARGETS = (
    Target("p50 latency @ 1k", 1_000, "p50_ms", "ms", None, reme=75.0),
    Target("p50 latency @ 10k", 10_000, "p50_ms", "ms", 3.0, reme=810.0),
    Target("throughput @ 10k", 10_000, "req_per_s", "req/s", 400.0, higher_is_better=True, reme=1.5),
    Target("load time @ 10k", 10_000, "load_s", "s", 2.0, reme=12.9),
    Target("p50 latency @ 100k", 100_000, "p50_ms", "ms", 25.0),
)


def print_table(results: Sequence[SizeResult], args: argparse.Namespace) -> None:
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "unset")
    print(
        f"\nretrieve_task_memory over HTTP, store={args.store}, top_k={TOP_K}, {os.cpu_count()} CPUs, "
        f"OPENBLAS_NUM_THREADS={blas}"
    )
    header = (
        f"{'N':>8} {'load s':>7} {'RSS MiB':>8} {'+RSS':>6} {'vec MiB':>8} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'p99 ms':>7} {'req/s':>7} {'p50@c ms':>9} {'p99@c ms':>9} {'srv CPU':>8} {'cli CPU':>8} {'fail':>5}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.size:>8,} {r.load_s:>7.2f} {r.rss_mib:>8.0f} {r.rss_delta_mib:>6.0f} {r.vectors_mib:>8.1f} "
            f"{r.p50_ms:>7.2f} {r.p95_ms:>7.2f} {r.p99_ms:>7.2f} {r.req_per_s:>7.0f} {r.load_p50_ms:>9.2f} "
            f"{r.load_p99_ms:>9.2f} {r.server_cpu:>8.2f} {r.client_cpu:>8.2f} {len(r.failures):>5}"
        )
    print(
        f"(sequential: {args.requests} requests after {WARMUP_REQUESTS} warm-up, one keep-alive connection; "
        f"@c: {args.concurrency} concurrent clients for {args.duration:g} s; CPU = cores busy during that run; "
        f"+RSS = growth during the load; vec = N x {DIM} x 4 bytes)"
    )


def target_rows(results: Sequence[SizeResult]) -> list[dict[str, Any]]:
    by_size = {r.size: r for r in results}
    rows = []
    for target in TARGETS:
        result = by_size.get(target.size)
        if result is None:
            continue
        value = float(getattr(result, target.metric))
        rows.append({**asdict(target), "value": value, "verdict": target.verdict(value)})
    return rows


def print_targets(rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        return
    print(f"\n{'figure':<22} {'measured':>14} {'target':>14} {'ReMe 0.2.0.6':>14}  verdict")
    for row in rows:
        op = ">=" if row["higher_is_better"] else "<="
        goal = f"{op} {row['goal']:g} {row['unit']}" if row["goal"] is not None else "-"
        reme = f"{row['reme']:g} {row['unit']}" if row["reme"] is not None else "-"
        speedup = ""
        if row["reme"] and row["value"]:
            ratio = row["value"] / row["reme"] if row["higher_is_better"] else row["reme"] / row["value"]
            speedup = f"  ({ratio:,.0f}x ReMe)"
        measured = f"{row['value']:.2f} {row['unit']}"
        print(f"{row['label']:<22} {measured:>14} {goal:>14} {reme:>14}  {row['verdict']}{speedup}")


# ----------------------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------------------


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not sizes or any(s < 2 * TOP_K for s in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be at least {2 * TOP_K}")
    return sizes


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=parse_sizes, default=[1_000, 10_000, 100_000], help="e.g. 1000,10000")
    parser.add_argument("--store", choices=sorted(STORE_OVERRIDES), default="local")
    parser.add_argument("--requests", type=int, default=300, help="sequential requests per size (after warm-up)")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent clients in the throughput run")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of the throughput run")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs the service")
    parser.add_argument("--dir", default=None, help="parent of the temporary working directory")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (libraries, log)")
    parser.add_argument("--startup-timeout", type=float, default=60.0)
    parser.add_argument("--load-timeout", type=float, default=900.0)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="extra service overrides")
    args = parser.parse_args(argv)
    if bad := [o for o in args.overrides if "=" not in o]:
        parser.error(f"overrides must be key=value: {' '.join(bad)}")
    return args


def _terminate_on_sigterm() -> None:
    """Treat SIGTERM like Ctrl-C, so the `finally` blocks stop the server."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


@contextlib.contextmanager
def running_chroma(workdir: Path, timeout: float) -> Iterator[list[str]]:
    """A `chroma run` server (from the chromadb package beside the interpreter) on a free loopback port, storing
    in `workdir/chroma`; yields the service overrides that point the store at it."""
    port = free_port()
    chroma = Path(sys.executable).parent / "chroma"
    command = [str(chroma), "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(workdir / "chroma")]
    with (workdir / "chroma.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chroma run did not start (log: {workdir / 'chroma.log'})")
            time.sleep(0.1)
        print(f"chroma server pid {process.pid} on 127.0.0.1:{port}")
        yield ["vector_store.default.params.host=127.0.0.1", f"vector_store.default.params.port={port}"]
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def run(args: argparse.Namespace) -> list[SizeResult]:
    overrides = [*BASE_OVERRIDES, *STORE_OVERRIDES[args.store], *args.overrides]
    queries = make_queries(max(args.requests + WARMUP_REQUESTS, 1_000), args.seed)
    results: list[SizeResult] = []
    tmp = tempfile.mkdtemp(prefix="retrieval-speed-", dir=args.dir)
    workdir = Path(tmp).resolve()
    try:
        with contextlib.ExitStack() as stack:
            if args.store == "chroma":
                overrides += stack.enter_context(running_chroma(workdir, args.startup_timeout))
            server = stack.enter_context(running_server(args.python, workdir, overrides, args.startup_timeout))
            print(f"command: {' '.join(server.command[1:])}")
            for size in args.sizes:
                results.append(bench_size(server, args, size, queries))
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _terminate_on_sigterm()
    try:
        results = run(args)
    except KeyboardInterrupt:
        print("\ninterrupted; server stopped", file=sys.stderr)
        return 130
    except (RuntimeError, httpx.HTTPError) as exc:
        print(f"retrieval_speed: {exc}", file=sys.stderr)
        return 2
    print_table(results, args)
    rows = target_rows(results)
    print_targets(rows)
    if args.json:
        report = {
            "store": args.store,
            "overrides": args.overrides,
            "requests": args.requests,
            "concurrency": args.concurrency,
            "duration_s": args.duration,
            "cpus": os.cpu_count(),
            "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
            "results": [asdict(r) for r in results],
            "targets": rows,
        }
        Path(args.json).write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
        print(f"\nwrote {args.json}")
    failed = sum(len(r.failures) for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
