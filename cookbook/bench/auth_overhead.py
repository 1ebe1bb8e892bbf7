"""What API keys cost a query: `retrieve_task_memory` p50 on a 10,000-memory workspace, with and without keys.

Starts two services side by side (hash embedder, local store; the server of retrieval_speed.py): one open (no key
file), one whose key file holds a key for the workspace, so it checks every request (the key's hash, its
workspaces and scope, the key file's freshness). Both load the same library; then rounds of sequential queries
alternate between them, so a busy machine slows both alike. Prints p50/p99 of each and the difference.

    .venv/bin/python cookbook/bench/auth_overhead.py
    .venv/bin/python cookbook/bench/auth_overhead.py --size 10000 --rounds 6 --requests 300 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import retrieval_speed as rs  # noqa: E402

from reme_service.app import ReMeApp  # noqa: E402
from reme_service.auth.access import Access  # noqa: E402
from reme_service.auth.credentials import presented_key  # noqa: E402
from reme_service.auth.keyfile import create_key  # noqa: E402
from reme_service.auth.policy import authorize  # noqa: E402

WORKSPACE = "bench_auth"


def measure(server: rs.Server, queries: Sequence[str], requests: int, offset: int) -> list[float]:
    samples = []
    with httpx.Client(base_url=server.base_url, headers=rs.api_key_headers(), timeout=60.0) as client:
        for i in range(requests):
            payload = {"workspace_id": WORKSPACE, "query": queries[(offset + i) % len(queries)], "top_k": rs.TOP_K}
            started = time.perf_counter()
            response = client.post(rs.FLOW, json=payload)
            samples.append(time.perf_counter() - started)
            problem = rs.check_response(response)
            if problem:
                raise RuntimeError(f"{server.base_url}: {problem}")
    return samples


def check_cost(calls: int = 20_000) -> float:
    """Microseconds the whole check takes in process: read the header, authenticate (hash, lookup, key-file
    freshness), build the caller, check scope and workspaces. The end-to-end figures below carry the noise of two
    servers on a shared machine; this one does not."""
    with tempfile.TemporaryDirectory(prefix="reme-auth-check-") as tmp:
        data = Path(tmp)
        _, key = create_key(data / "auth" / "keys.json", workspaces=[WORKSPACE], scope="write")
        app = ReMeApp(f"data_dir={data}", "embedding_model.default.backend=hash", env={})
        access = Access.open(app.config.auth, data, host="127.0.0.1")
        flow = app.config.flow["retrieve_task_memory"]
        request = app.flows["retrieve_task_memory"].request_model.model_validate(
            {"workspace_id": WORKSPACE, "query": "q"}
        )
        headers = [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {key}".encode())]
        started = time.perf_counter()
        for _ in range(calls):
            caller = access.caller(presented_key(headers))
            authorize(caller, "retrieve_task_memory", flow, request, WORKSPACE)
        return (time.perf_counter() - started) / calls * 1e6


def run(args: argparse.Namespace) -> dict[str, Any]:
    overrides = ["embedding_model.default.backend=hash", "vector_store.default.backend=local", *args.overrides]
    with tempfile.TemporaryDirectory(prefix="reme-auth-bench-") as tmp:
        open_dir, keyed_dir = Path(tmp) / "open", Path(tmp) / "keyed"
        for workdir in (open_dir, keyed_dir):
            rs.write_library(workdir / "lib" / f"{WORKSPACE}.jsonl", WORKSPACE, args.size, args.seed)
        _, key = create_key(keyed_dir / "data" / "auth" / "keys.json", workspaces=[WORKSPACE], scope="write")
        os.environ["REME_API_KEY"] = key  # sent to both; only the keyed service checks it
        queries = rs.make_queries(500, args.seed)
        samples: dict[str, list[float]] = {"without keys": [], "with keys": []}
        with (
            rs.running_server(args.python, open_dir, overrides, timeout=120) as open_server,
            rs.running_server(args.python, keyed_dir, overrides, timeout=120) as keyed_server,
        ):
            servers = {"without keys": open_server, "with keys": keyed_server}
            for name, server in servers.items():
                seconds, size = rs.load_library(server, WORKSPACE, timeout=900)
                print(f"{name}: loaded {size:,} memories in {seconds:.1f} s", flush=True)
                measure(server, queries, 50, 0)  # warm-up
            for round_index in range(args.rounds):
                order = list(servers.items()) if round_index % 2 == 0 else list(reversed(servers.items()))
                for name, server in order:
                    samples[name] += measure(server, queries, args.requests, round_index * args.requests)
                print(f"round {round_index + 1}/{args.rounds} done", flush=True)
    rows = {}
    for name, values in samples.items():
        ordered = sorted(values)
        rows[name] = {
            "requests": len(ordered),
            "p50_ms": round(rs.percentile(ordered, 50) * 1e3, 3),
            "p99_ms": round(rs.percentile(ordered, 99) * 1e3, 3),
        }
    added = rows["with keys"]["p50_ms"] - rows["without keys"]["p50_ms"]
    cost = check_cost()
    return {
        "size": args.size,
        "rows": rows,
        "added_p50_ms": round(added, 3),
        "check_us": round(cost, 1),
        "target_ms": 0.1,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=rs.positive_int, default=10_000, help="memories in the workspace (10,000)")
    parser.add_argument("--rounds", type=rs.positive_int, default=6, help="alternating rounds (6)")
    parser.add_argument("--requests", type=rs.positive_int, default=300, help="queries per round and service (300)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--python", default=sys.executable, help="the Python that runs the services")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("overrides", nargs="*", help="extra key=value settings for both services")
    report = run(parser.parse_args(argv))
    print()
    print(f"retrieve_task_memory on {report['size']:,} memories    {'requests':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for name, row in report["rows"].items():
        print(f"  {name:44} {row['requests']:>8} {row['p50_ms']:>8} {row['p99_ms']:>8}")
    verdict = "meets" if report["added_p50_ms"] <= report["target_ms"] else "misses"
    print(
        f"keys add {report['added_p50_ms']:+.3f} ms to p50 end to end ({verdict} the {report['target_ms']} ms target)"
    )
    print(f"the check itself, in process: {report['check_us']} µs per request")
    args = parser.parse_args(argv)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
