"""The unit a vector store holds: an id, the embedded text, metadata and (optionally) the vector."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer


def _to_vector(value: Any) -> NDArray[np.float32] | None:
    if value is None:
        return None
    arr = np.asarray(value, dtype=np.float32)
    if arr.ndim != 1:
        raise ValueError("a vector must be one-dimensional")
    return arr


Vector = Annotated[
    NDArray[np.float32],
    BeforeValidator(_to_vector),
    PlainSerializer(lambda a: a.tolist(), return_type=list[float]),
]


def new_id() -> str:
    """A fresh node / memory id: uuid4 as 32 hex characters (ReMe's format)."""
    return uuid.uuid4().hex


class VectorNode(BaseModel):
    """One stored item. `content` is the text that is embedded; `vector` is float32 when present."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    unique_id: str = Field(default_factory=new_id)
    workspace_id: str = ""
    content: str = ""
    vector: Vector | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class SearchHit(BaseModel):
    """A node returned by a search with its similarity in [0, 1] (higher is closer)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    node: VectorNode
    score: float
