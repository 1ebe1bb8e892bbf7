"""Helper process for the kill -9 test: upsert numbered batches into a LocalVectorStore, acknowledging each.

Usage: `python local_store_writer.py STORE_DIR FIRST_BATCH COMPACT_AFTER_RECORDS [ANN_MIN_ROWS]`. After each `upsert`
returns, the batch number is printed (and flushed) on stdout. It runs until killed. With ANN_MIN_ROWS the workspace
keeps an approximate index from that many rows (saved at each compaction), and every third batch also deletes a
few nodes of the batch before it (`deleted_ids`), so the index follows deletes as well.

`run_until_killed` is the test side: it starts this script and SIGKILLs it soon after a number of acknowledgements.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.inproc.local import LocalVectorStore
from reme_service.stores.params import AnnParams, LocalStoreParams

WORKSPACE = "crash"
BATCH_SIZE = 40
DIM = 64


def batch_nodes(batch: int) -> list[VectorNode]:
    """Batch `batch`: even items carry a seeded vector, odd items are embedded from their content."""
    rng = np.random.default_rng(batch)
    vectors = rng.standard_normal((BATCH_SIZE, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [
        VectorNode(
            unique_id=f"b{batch}-{i}",
            content=f"batch {batch} item {i} payload {'x' * (i * 7)}",
            vector=vectors[i] if i % 2 == 0 else None,
            metadata={"batch": batch, "i": i},
        )
        for i in range(BATCH_SIZE)
    ]


def deleted_ids(batch: int) -> list[str]:
    """The ids the ANN variant deletes after writing `batch` (from the batch before it, every third batch)."""
    return [f"b{batch - 1}-{i}" for i in range(0, BATCH_SIZE, 9)] if batch % 3 == 2 else []


async def main(store_dir: str, first: int, compact_after_records: int, ann_min_rows: int | None) -> None:
    params = LocalStoreParams(
        store_dir=Path(store_dir), compact_after_records=compact_after_records, ann=AnnParams(min_rows=ann_min_rows)
    )
    store = LocalVectorStore(params, embedder=HashEmbeddingClient(dimensions=DIM))
    await store.start()
    batch = first
    while True:
        await store.upsert(WORKSPACE, batch_nodes(batch))
        if ann_min_rows is not None and (gone := deleted_ids(batch)):
            await store.delete_ids(WORKSPACE, gone)
        print(batch, flush=True)
        batch += 1


def run_until_killed(
    store_dir: Path, first: int, wanted_acks: int, stderr_path: Path, args: Sequence[str], pause: float
) -> list[int]:
    """Start this writer on `store_dir` from batch `first` with `args` (COMPACT_AFTER_RECORDS [ANN_MIN_ROWS]); once
    it has acknowledged `wanted_acks` batches, wait `pause` s and SIGKILL it. The acknowledged batches, in order."""
    from tests.conftest import REPO_ROOT  # the test side only: the writer process does not import pytest's conftest

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, str(Path(__file__)), str(store_dir), str(first), *args]
    with open(stderr_path, "ab") as stderr:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=REPO_ROOT)
        assert proc.stdout is not None
        watchdog = threading.Timer(60, proc.kill)
        watchdog.start()
        acked: list[int] = []
        try:
            while len(acked) < wanted_acks and (line := proc.stdout.readline()):
                acked.append(int(line))
            threading.Event().wait(pause)
        finally:
            proc.send_signal(signal.SIGKILL)
            # the rest through the same buffered reader: `readline` may have read acks ahead into its buffer, which
            # `communicate(timeout=...)` (reading the pipe's descriptor itself) would skip
            with proc.stdout:
                rest = proc.stdout.read()
            proc.wait(timeout=30)
            watchdog.cancel()
    return acked + [int(token) for token in rest.split()]


if __name__ == "__main__":
    ann = int(sys.argv[4]) if len(sys.argv) > 4 else None
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), ann))
