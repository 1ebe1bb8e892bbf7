"""The size bound of one memory, checked by `GuardedStore` on every write of memories before anything is written.

Every path that writes memories — the flows, `vector_store insert` and `load`, the management API's PATCH and
import — reaches a backend through the wrapper's `upsert` or `replace_workspace`. A node's size is what a store keeps
of it and what every read of it hands back: the UTF-8 bytes of its id and content (the memory's `when_to_use`) and
its metadata as compact JSON (the rest of the memory). A batch with one node over the store's `max_memory_bytes`
is refused whole with 413 `payload_too_large`, naming the node's position in the batch, its id, its size and the
limit: nothing of it is written. (One memory of a million metadata keys, an 18.8 MB body, was accepted, and every
later read of its workspace, even of one memory, took 1-2 s and answered 16.8 MB.)

The writes of a re-embedding (`GuardedStore.vectors_only`) write back memories already stored and are not checked,
nor are the copies of a `copy_workspace` (memories already stored).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from reme_service.errors import PayloadTooLargeError
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.inproc.packed import PackedNodes

#: the default of `vector_store.<name>.max_memory_bytes`: 1 MiB, ~700 times the largest memory of the shipped
#: libraries (1.4 KB) and room for a tool memory of several hundred recorded calls
DEFAULT_MAX_MEMORY_BYTES = 1 << 20


def node_bytes(node: VectorNode) -> int:
    """A node's stored size: id and content as UTF-8, metadata as compact JSON (0 for metadata that is not JSON:
    the store refuses that itself)."""
    try:
        meta = len(orjson.dumps(node.metadata))
    except TypeError:
        meta = 0
    return len(node.unique_id.encode()) + len(node.content.encode()) + meta


def check_sizes(nodes: Sequence[VectorNode], limit: int | None) -> None:
    """Raise `PayloadTooLargeError` for the first node of `nodes` larger than `limit` bytes (None: no limit)."""
    if limit is None:
        return
    if isinstance(nodes, PackedNodes):  # a library load: the metadata is JSON already
        sizes: Any = (
            (row.unique_id, len(row.unique_id.encode()) + len(row.content.encode()) + len(row.meta))
            for row in nodes.rows
        )
    else:
        sizes = ((node.unique_id, node_bytes(node)) for node in nodes)
    for index, (unique_id, size) in enumerate(sizes):
        if size > limit:
            raise PayloadTooLargeError(
                f"memory {index} of the write (id {unique_id!r}) is {size} bytes (id, when_to_use and the rest of "
                f"the memory as JSON); at most {limit} bytes are allowed per memory "
                "(vector_store.<name>.max_memory_bytes). Nothing was written",
                details={"index": index, "memory_id": unique_id, "bytes": size, "limit": limit},
            )
