"""Embedding spaces: which embedder made a workspace's vectors, and the check that refuses to mix two.

A workspace's vectors are comparable only with vectors of the same embedder: provider (the embedding backend),
model and dimension together make its `EmbeddingSpace`. Every store records the space of the embedder that wrote
a workspace with the workspace itself (memory/local: in the workspace's state and its snapshot and log; Chroma:
in the collection's metadata), so the record changes atomically with the vectors (`replace_workspace`).

The rule, checked by the stores (`check_space`): a workspace that holds vectors and records a space other than
the store's embedder's refuses writes and searches with a 409 `conflict` naming both spaces (a query embedded in
one space searched against vectors of another ranks noise). Listing, reading by id and deleting still work, and
`vector_store action=reembed` moves the workspace to the current space. A workspace without a recorded space
(made before spaces were recorded, or holding no vectors) takes the current one at its next write. A record whose
dimension is not the vectors' (vectors given by a caller at another dimension than the embedder's) is ignored
(`recorded_space`): the dimension check answers for those.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from reme_service.errors import ConflictError
from reme_service.providers.embedding.base import EmbeddingClient


class EmbeddingSpace(BaseModel):
    """The embedder a workspace's vectors come from."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    provider: str
    model: str
    dimensions: int

    def label(self) -> str:
        return f"{self.provider}/{self.model} ({self.dimensions} dimensions)"

    def to_json(self) -> str:
        return orjson.dumps(self.model_dump()).decode()


def space_of(embedder: EmbeddingClient) -> EmbeddingSpace:
    """The space of the vectors `embedder` makes."""
    return EmbeddingSpace(provider=embedder.backend, model=embedder.model_name, dimensions=embedder.dimensions)


def parse_space(value: Any) -> EmbeddingSpace | None:
    """A recorded space (a dict, or its JSON text) back as an `EmbeddingSpace`; None when absent or unreadable."""
    if value is None or value == "":
        return None
    try:
        data = orjson.loads(value) if isinstance(value, str | bytes) else value
        return EmbeddingSpace.model_validate(data)
    except (orjson.JSONDecodeError, ValidationError):
        return None


def recorded_space(space: EmbeddingSpace | None, dim: int | None) -> EmbeddingSpace | None:
    """The space a workspace holding vectors of dimension `dim` is in: its record, unless that names another
    dimension (the vectors were given by the caller, not made by that embedder: only the dimension check applies)."""
    return space if space is not None and space.dimensions == dim else None


class EmbeddingSpaceConflictError(ConflictError):
    """A workspace's vectors come from another embedding space than the store's embedder (409 `conflict`)."""


def check_space(workspace_id: str, recorded: EmbeddingSpace | None, current: EmbeddingSpace, action: str) -> None:
    """Refuse `action` ("write to", "search") on a workspace recorded in another space than `current`."""
    if recorded is None or recorded == current:
        return
    raise EmbeddingSpaceConflictError(
        f"cannot {action} workspace {workspace_id!r}: its vectors come from the embedding space "
        f"{recorded.label()}, but the service now embeds with {current.label()}; run the vector_store action "
        f"'reembed' on it (docs/operations.md, 'Changing the embedder')",
        details={
            "workspace_id": workspace_id,
            "workspace_space": recorded.model_dump(),
            "current_space": current.model_dump(),
        },
    )
