"""Turning the nodes of a write into a `Batch` for the in-process stores: deduplicated, embedded, normalised.

Validation and embedding (one embedder call per batch) happen here, before the workspace's write lock is taken;
building the rows of a large batch runs in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial

import numpy as np
from numpy.typing import NDArray

from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.inproc.packed import PackedNodes, StoredNode
from reme_service.stores.inproc.workspace import INLINE_ROWS, Batch
from reme_service.stores.vectors import batch_dimension, embed_checked, latest_by_id, normalise_rows


async def prepare_batch(
    embedder: EmbeddingClient, workspace_id: str, nodes: Sequence[VectorNode], dim: int | None
) -> Batch:
    """Validate, embed (one call) and normalise `nodes` against dimension `dim` (None: the first fixes it)."""
    if isinstance(nodes, PackedNodes):
        return await _prepare_packed(embedder, workspace_id, nodes, dim)
    unique = latest_by_id(nodes)
    if not unique:
        return Batch([], np.empty((0, dim or 0), np.float32), dim)
    expected = batch_dimension(workspace_id, unique, dim, embedder.dimensions)
    missing = [i for i, node in enumerate(unique) if node.vector is None]
    embedded: NDArray[np.float32] | None = None
    if missing:
        embedded = await embed_checked(embedder, workspace_id, [unique[i].content for i in missing], expected)
    build = partial(_build_batch, workspace_id, unique, missing, embedded, expected)
    return build() if len(unique) < INLINE_ROWS else await asyncio.to_thread(build)


async def _prepare_packed(embedder: EmbeddingClient, workspace_id: str, packed: PackedNodes, dim: int | None) -> Batch:
    """`prepare_batch` for packed (vectorless) nodes: their rows are adopted as they are, not re-encoded. A large
    batch (a library load) is deduplicated and normalised in worker threads, not on the event loop."""
    small = len(packed.rows) < INLINE_ROWS
    unique = partial(_unique_rows, packed.rows, workspace_id)
    rows, texts = unique() if small else await asyncio.to_thread(unique)
    expected = dim if dim is not None else embedder.dimensions
    if not rows:
        return Batch([], np.empty((0, expected), np.float32), dim)
    vectors = await embed_checked(embedder, workspace_id, texts, expected)
    normalise = partial(_normalised_copy, vectors)
    return Batch(rows, normalise() if small else await asyncio.to_thread(normalise), expected)


def _build_batch(
    workspace_id: str,
    unique: list[VectorNode],
    missing: list[int],
    embedded: NDArray[np.float32] | None,
    dim: int,
) -> Batch:
    vectors = np.empty((len(unique), dim), np.float32)
    for i, node in enumerate(unique):
        if node.vector is not None:
            vectors[i] = node.vector
    if missing and embedded is not None:
        vectors[missing] = embedded
    nodes = [StoredNode.encode(n.unique_id, workspace_id, n.content, n.metadata) for n in unique]
    return Batch(nodes, normalise_rows(vectors), dim)


def _unique_rows(rows: Sequence[StoredNode], workspace_id: str) -> tuple[list[StoredNode], list[str]]:
    """The last row of each id, as rows of `workspace_id`, and their texts."""
    latest: dict[str, StoredNode] = {}
    for row in rows:
        latest[row.unique_id] = row
    unique = [
        row if row.workspace_id == workspace_id else StoredNode(row.unique_id, workspace_id, row.content, row.meta)
        for row in latest.values()
    ]
    return unique, [row.content for row in unique]


def _normalised_copy(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    return normalise_rows(np.array(vectors, dtype=np.float32))
