"""What the server-side backends (Chroma, Elasticsearch) share: batch preparation, write serialisation, ordering.

* `prepare` validates a batch, keeps the last version of each id (at its first position), embeds the nodes that
  carry no vector in one call, checks every dimension against the workspace's, and normalises vectors (so the
  backend's cosine equals ours and vectors read back are the ones stored).
* Writes to one workspace run one at a time under an internal lock (not `lock()`, which belongs to callers) and
  as shielded tasks: a cancelled caller never leaves a write half-applied by this process.
* Listing order: each node carries a sequence number, taken from a per-process clock (`time_ns`, strictly
  increasing) when its id is new and kept when it is replaced, so listing by it gives insertion order with a
  replaced node in its old place. (Several processes writing one workspace interleave by their clocks.)
* `exact_top` ranks nodes in numpy: the fallback for filters a backend cannot express exactly.
* `lock(workspace)`: with `shared_lock` set (Chroma in server mode, Elasticsearch), a lease in the shared server
  on top of the process's asyncio lock, so read-modify-write flows are safe across service processes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray

from reme_service.errors import InvalidRequestError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.stores.base import VectorStore
from reme_service.stores.shared_lock import SharedLock
from reme_service.stores.vectors import batch_dimension, embed_checked, latest_by_id, normalise_rows


@dataclass(slots=True)
class Prepared:
    """A batch ready to write: unique ids, contents, JSON-copied metadata, unit vectors (n x dim float32)."""

    ids: list[str]
    contents: list[str]
    metadatas: list[dict[str, Any]]
    vectors: NDArray[np.float32]
    dim: int | None

    def __len__(self) -> int:
        return len(self.ids)


def exact_top(nodes: Sequence[VectorNode], query: NDArray[np.float32], top_k: int) -> list[SearchHit]:
    """The `top_k` nodes closest to `query` by cosine (nodes carry unit vectors), without their vectors."""
    candidates = [node for node in nodes if node.vector is not None]
    if not candidates or top_k <= 0:
        return []
    matrix = np.stack([node.vector for node in candidates]).astype(np.float32)
    scores = matrix @ query
    order = np.argsort(-scores, kind="stable")[:top_k]
    return [
        SearchHit(node=candidates[i].model_copy(update={"vector": None}), score=min(max(float(scores[i]), 0.0), 1.0))
        for i in order.tolist()
    ]


class RemoteVectorStore(VectorStore):
    """Shared plumbing of the Chroma and Elasticsearch stores."""

    def __init__(self, *, embedder: EmbeddingClient) -> None:
        super().__init__(embedder=embedder)
        self._last_seq = 0
        self.shared_lock: SharedLock | None = None  # set by a backend whose workspace locks span processes

    def lock(self, workspace_id: str) -> AbstractAsyncContextManager[Any]:
        """With a shared lock, the workspace lock also excludes every other process using the same server and
        prefix (a lease record, see `shared_lock.py`); the process's own asyncio lock is taken first."""
        if self.shared_lock is None:
            return super().lock(workspace_id)
        return self.shared_lock.hold(workspace_id, self._locks[workspace_id])

    async def close(self) -> None:
        await super().close()
        if self.shared_lock is not None:
            await self.shared_lock.close()

    def _next_seq(self) -> int:
        self._last_seq = max(time.time_ns(), self._last_seq + 1)
        return self._last_seq

    async def prepare(self, workspace_id: str, nodes: Sequence[VectorNode], dim: int | None) -> Prepared:
        """Validate, embed (one call) and normalise `nodes` against dimension `dim` (None: the first fixes it)."""
        unique = latest_by_id(nodes)
        if not unique:
            return Prepared([], [], [], np.empty((0, dim or 0), np.float32), dim)
        expected = batch_dimension(workspace_id, unique, dim, self.embedder.dimensions)
        missing = [i for i, node in enumerate(unique) if node.vector is None]
        vectors = np.empty((len(unique), expected), np.float32)
        for i, node in enumerate(unique):
            if node.vector is not None:
                vectors[i] = node.vector
        if missing:
            texts = [unique[i].content for i in missing]
            vectors[missing] = await embed_checked(self.embedder, workspace_id, texts, expected)
        metadatas = []
        for node in unique:
            try:
                metadatas.append(orjson.loads(orjson.dumps(node.metadata)))
            except TypeError as exc:
                raise InvalidRequestError(
                    f"the metadata of {node.unique_id!r} is not JSON-serialisable: {exc}"
                ) from exc
        return Prepared(
            [n.unique_id for n in unique], [n.content for n in unique], metadatas, normalise_rows(vectors), expected
        )

    async def copy_workspace(self, src: str, dest: str) -> int:
        """Upsert copies of every node of `src` into `dest`, vectors reused; a new `dest` takes `src`'s dimension."""
        nodes = await self.list_nodes(src, with_vectors=True)
        if not nodes:
            await self.create_workspace(dest)
            return 0
        await self.upsert(dest, [n.model_copy(update={"workspace_id": dest}) for n in nodes])
        return len(nodes)
