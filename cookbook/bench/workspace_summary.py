"""A workspace's summary (what `GET /workspaces` shows of it) at 100k and 1M memories: `VectorStore.summarize` of
the local store against the base's default (every memory made a `VectorNode` by `list_nodes`, then counted),
with each one's time and the process's peak RSS while it runs.

    .venv/bin/python cookbook/bench/workspace_summary.py                      # 100k and 1M (a few minutes)
    .venv/bin/python cookbook/bench/workspace_summary.py --sizes 100000

Per size, one child process builds a local store of that many task memories (retrieval_speed's synthetic library,
hash embedder, 64 dimensions: the vectors play no part in a summary) with one `replace_workspace`; then one child
per way loads the workspace into RAM and summarises it twice (the first call counts, the second shows what a later
request costs), RSS sampled every 10 ms. The two ways must agree.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ann_million import WS, library  # noqa: E402
from proc_info import rss_mib  # noqa: E402

from reme_service.providers.embedding.hash import HashEmbeddingClient  # noqa: E402
from reme_service.stores.base import VectorStore  # noqa: E402
from reme_service.stores.inproc.local import LocalVectorStore  # noqa: E402
from reme_service.stores.params import LocalStoreParams  # noqa: E402

DIM = 64


def store_at(path: Path) -> LocalVectorStore:
    params = LocalStoreParams(store_dir=path, max_resident_mb=None)
    return LocalVectorStore(params, embedder=HashEmbeddingClient(dimensions=DIM))


async def build(path: Path, count: int) -> dict[str, Any]:
    started = time.perf_counter()
    store = store_at(path)
    await store.start()
    await store.replace_workspace(WS, library(count))
    await store.close()
    return {"build_s": time.perf_counter() - started}


async def measure(path: Path, how: str) -> dict[str, Any]:
    store = store_at(path)
    await store.start()
    await store.workspace_space(WS)  # loads the workspace into RAM
    before = rss_mib()
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.01):
            samples.append(rss_mib())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    summarize = store.summarize if how == "store" else (lambda ws: VectorStore.summarize(store, ws))
    started = time.perf_counter()
    summary = await summarize(WS)
    first = time.perf_counter() - started
    started = time.perf_counter()
    again = await summarize(WS)
    second = time.perf_counter() - started
    stop.set()
    sampler.join()
    await store.close()
    assert again == summary
    return {
        "first_ms": 1000 * first,
        "again_ms": 1000 * second,
        "rss_before_mib": before,
        "rss_growth_mib": max([before, *samples]) - before,
        "summary": [summary.size, summary.counts, summary.last_modified],
    }


def _child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, *args], check=True, stdout=subprocess.PIPE, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--build", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--measure", choices=("store", "default"), help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.build is not None:
        print(json.dumps(asyncio.run(build(args.dir, args.build))))
        return 0
    if args.measure is not None:
        print(json.dumps(asyncio.run(measure(args.dir, args.measure))))
        return 0
    print(f"{'memories':>10} {'way':>8} {'first ms':>10} {'again ms':>10} {'RSS before':>11} {'RSS growth':>11}")
    for size in (int(text) for text in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="reme-summary-") as tmp:
            where = Path(tmp) / "vs"
            _child(["--build", str(size), "--dir", str(where)])
            answers = []
            for how in ("default", "store"):
                figures = _child(["--measure", how, "--dir", str(where)])
                answers.append(figures.pop("summary"))
                print(
                    f"{size:>10,} {how:>8} {figures['first_ms']:>10,.1f} {figures['again_ms']:>10,.1f} "
                    f"{figures['rss_before_mib']:>8,.0f} MiB {figures['rss_growth_mib']:>8,.0f} MiB",
                    flush=True,
                )
            if answers[0] != answers[1]:
                raise SystemExit(f"the two ways disagree: {answers}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
