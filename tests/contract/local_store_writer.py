"""Helper process for the kill -9 test: upsert numbered batches into a LocalVectorStore, acknowledging each.

Usage: `python local_store_writer.py STORE_DIR FIRST_BATCH COMPACT_AFTER_RECORDS`. After each `upsert` returns,
the batch number is printed (and flushed) on stdout. It runs until killed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np

from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.local import LocalVectorStore
from reme_service.stores.params import LocalStoreParams

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


async def main(store_dir: str, first: int, compact_after_records: int) -> None:
    store = LocalVectorStore(
        LocalStoreParams(store_dir=Path(store_dir), compact_after_records=compact_after_records),
        embedder=HashEmbeddingClient(dimensions=DIM),
    )
    await store.start()
    batch = first
    while True:
        await store.upsert(WORKSPACE, batch_nodes(batch))
        print(batch, flush=True)
        batch += 1


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
