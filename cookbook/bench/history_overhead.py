"""What the memories' history costs a write: `vector_store insert` of one memory into a 10,000-memory workspace,
with history on and off.

Two apps side by side, in process (Python API: no HTTP noise), each on its own local store with the hash embedder
and the audit log on (the default): one with `history.enabled=true`, one with `false`. Both load the same 10,000
memories; then rounds alternate between them (so a busy machine slows both alike), each round a run of single-memory
writes: half update an existing memory (an UPDATE entry: the before-values come from the lookup the audited seam
already does), half add a new one (an ADD entry). A batch of 100 updates a request is measured too. Prints the p50
of each and the difference per write. On a disk whose fsync is slow, the history's fsync overlaps the audit log's
(they run at once), so what is left is the entry work and the second fsync's overlap.

    .venv/bin/python cookbook/bench/history_overhead.py
    .venv/bin/python cookbook/bench/history_overhead.py --size 10000 --rounds 6 --writes 100
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from reme_service.app import ReMeApp

WORKSPACE = "bench_history"
BATCH = 100


def memory(i: int, version: int = 0) -> dict[str, Any]:
    return {
        "memory_id": f"m{i}",
        "when_to_use": f"when the deployment number {i} fails",
        "content": f"check the logs of service {i}, then roll back (revision {version})",
        "score": 1.0,
    }


async def run(app: ReMeApp, **fields: Any) -> None:
    result = await app.async_execute(name="vector_store", workspace_id=WORKSPACE, **fields)
    if not result["success"]:
        raise RuntimeError(result["metadata"]["error"])


async def load(app: ReMeApp, size: int) -> None:
    for start in range(0, size, 1000):
        await run(app, action="insert", memory_dicts=[memory(i) for i in range(start, min(size, start + 1000))])


async def single_writes(app: ReMeApp, size: int, writes: int, round_no: int) -> list[float]:
    samples = []
    for n in range(writes):
        # even: update an existing memory; odd: add a new one (ids beyond the loaded ones)
        i = (round_no * writes + n) % size if n % 2 == 0 else size + round_no * writes + n
        started = time.perf_counter()
        await run(app, action="insert", memory_dicts=[memory(i, version=round_no + 1)])
        samples.append(time.perf_counter() - started)
    return samples


async def batch_write(app: ReMeApp, size: int, round_no: int) -> float:
    dicts = [memory((round_no * BATCH + k) % size, version=100 + round_no) for k in range(BATCH)]
    started = time.perf_counter()
    await run(app, action="insert", memory_dicts=dicts)
    return (time.perf_counter() - started) / BATCH


async def main(size: int, rounds: int, writes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        apps = {
            on: ReMeApp(
                f"data_dir={Path(tmp) / str(on)}",
                "embedding_model.default.backend=hash",
                "vector_store.default.backend=local",
                f"history.enabled={str(on).lower()}",
                env={},
            )
            for on in (True, False)
        }
        for app in apps.values():
            await app.start()
        try:
            for app in apps.values():
                await load(app, size)
            single: dict[bool, list[float]] = {True: [], False: []}
            batched: dict[bool, list[float]] = {True: [], False: []}
            for round_no in range(rounds):
                order = (True, False) if round_no % 2 == 0 else (False, True)
                for on in order:
                    single[on] += await single_writes(apps[on], size, writes, round_no)
                    batched[on].append(await batch_write(apps[on], size, round_no))
        finally:
            for app in apps.values():
                await app.stop()
    ms = 1000.0
    p50 = {on: statistics.median(single[on]) * ms for on in single}
    per = {on: statistics.median(batched[on]) * ms for on in batched}
    print(f"history overhead at {size:,} memories ({rounds} rounds x {writes} single writes, {BATCH}-memory batches)")
    print(f"  single write p50: history on {p50[True]:.3f} ms, off {p50[False]:.3f} ms, ")
    print(f"    added per write: {p50[True] - p50[False]:+.3f} ms")
    print(f"  batch of {BATCH}, per memory: history on {per[True]:.3f} ms, off {per[False]:.3f} ms, ")
    print(f"    added per write: {per[True] - per[False]:+.3f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--writes", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(main(args.size, args.rounds, args.writes))
