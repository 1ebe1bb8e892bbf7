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


# -- trusted construction ----------------------------------------------------------------------------------------
#
# A store builds a node and a hit for every search result from values it wrote itself. `model_construct` skips
# validation but still walks the model's fields, defaults and extras on every call (~3.5 µs a node, ~1.9 a hit); a
# search with a rescoring pool of 20 spent ~0.15 ms there. These fill the same four slots `model_construct` fills,
# with every field given, so the result is the same object (equal, same `model_fields_set`, dumps alike).

_NODE_FIELDS = frozenset(VectorNode.model_fields)
_HIT_FIELDS = frozenset(SearchHit.model_fields)
_new = object.__new__
_set_slot = object.__setattr__


def _trusted(cls: type[BaseModel], values: dict[str, Any], fields: frozenset[str]) -> Any:
    model = _new(cls)
    _set_slot(model, "__dict__", values)
    _set_slot(model, "__pydantic_fields_set__", set(fields))
    _set_slot(model, "__pydantic_extra__", None)
    _set_slot(model, "__pydantic_private__", None)
    return model


def trusted_node(
    unique_id: str, workspace_id: str, content: str, metadata: dict[str, Any], vector: NDArray[np.float32] | None
) -> VectorNode:
    """`VectorNode.model_construct` of all five fields, for values a store holds (no validation)."""
    values = {
        "unique_id": unique_id,
        "workspace_id": workspace_id,
        "content": content,
        "vector": vector,
        "metadata": metadata,
    }
    node: VectorNode = _trusted(VectorNode, values, _NODE_FIELDS)
    return node


def trusted_hit(node: VectorNode, score: float) -> SearchHit:
    """`SearchHit.model_construct(node=node, score=score)` (no validation)."""
    hit: SearchHit = _trusted(SearchHit, {"node": node, "score": score}, _HIT_FIELDS)
    return hit


def trusted_search_hit(
    unique_id: str, workspace_id: str, content: str, metadata: dict[str, Any], score: float
) -> SearchHit:
    """`trusted_hit(trusted_node(..., None), score)` in one call: a search makes one for every candidate of the
    rescoring pool, and this is `_trusted` twice inline (one Python call a hit instead of four)."""
    node: VectorNode = _new(VectorNode)
    values = {
        "unique_id": unique_id,
        "workspace_id": workspace_id,
        "content": content,
        "vector": None,
        "metadata": metadata,
    }
    _set_slot(node, "__dict__", values)
    _set_slot(node, "__pydantic_fields_set__", set(_NODE_FIELDS))
    _set_slot(node, "__pydantic_extra__", None)
    _set_slot(node, "__pydantic_private__", None)
    hit: SearchHit = _new(SearchHit)
    _set_slot(hit, "__dict__", {"node": node, "score": score})
    _set_slot(hit, "__pydantic_fields_set__", set(_HIT_FIELDS))
    _set_slot(hit, "__pydantic_extra__", None)
    _set_slot(hit, "__pydantic_private__", None)
    return hit
