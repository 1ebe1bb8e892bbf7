"""Vector checks every store shares: a batch's ids and dimensions, embedding the nodes that carry no vector,
dimension errors, unit-length normalisation of stored rows and of queries.

Stores keep unit vectors, so a dot product is the cosine. Rows already within `NORM_TOLERANCE` of unit length
are left exactly as given (a vector read back is the one written); zero rows stay zero; NaN or infinity is a 400.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

from reme_service.errors import DimensionMismatchError, InvalidRequestError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode

NORM_TOLERANCE = 1e-4

# A query vector as callers hold it: a list, or a row of the embedder's float32 matrix (`EmbeddingClient.embed`).
QueryVector: TypeAlias = Sequence[float] | NDArray[np.floating[Any]]


def dimension_error(workspace_id: str, expected: int, actual: int, what: str) -> DimensionMismatchError:
    return DimensionMismatchError(
        f"{what} has dimension {actual}, but workspace {workspace_id!r} holds vectors of dimension {expected}",
        details={"workspace_id": workspace_id, "expected": expected, "actual": actual},
    )


def latest_by_id(nodes: Sequence[VectorNode]) -> list[VectorNode]:
    """One node per id: the last version, at the id's first position."""
    latest: dict[str, VectorNode] = {}
    for node in nodes:
        latest[node.unique_id] = node
    return list(latest.values())


def batch_dimension(workspace_id: str, unique: Sequence[VectorNode], dim: int | None, embedder_dim: int) -> int:
    """The dimension a non-empty batch must have (`dim`, else its first vector's, else the embedder's), after
    checking that every vector given is one-dimensional and of that dimension."""
    for node in unique:
        if node.vector is not None and np.ndim(node.vector) != 1:
            raise InvalidRequestError(f"the vector of node {node.unique_id!r} must be one-dimensional")
    first = unique[0].vector
    expected = dim if dim is not None else (len(first) if first is not None else embedder_dim)
    for node in unique:
        if node.vector is not None and len(node.vector) != expected:
            raise dimension_error(workspace_id, expected, len(node.vector), f"the vector of node {node.unique_id!r}")
    return expected


async def embed_checked(
    embedder: EmbeddingClient, workspace_id: str, texts: list[str], expected: int
) -> NDArray[np.float32]:
    """`embedder.embed(texts)`, refused (before and after the call) unless its vectors have dimension `expected`."""
    if embedder.dimensions != expected:
        raise dimension_error(workspace_id, expected, embedder.dimensions, "the embedder's output")
    vectors = await embedder.embed(texts)
    if vectors.shape != (len(texts), expected):
        raise dimension_error(workspace_id, expected, vectors.shape[-1], "the embedder's output")
    return vectors


def normalise_rows(vectors: NDArray[np.float32], *, what: str = "a node vector") -> NDArray[np.float32]:
    """`vectors` (changed in place) with every non-zero row off unit length scaled to it."""
    if not np.isfinite(vectors).all():
        raise InvalidRequestError(f"{what} holds NaN or infinity")
    norms = np.linalg.norm(vectors, axis=1)
    off = (np.abs(norms - 1.0) > NORM_TOLERANCE) & (norms > 0)
    if off.any():
        vectors[off] /= norms[off, None]
    return vectors


def as_query(vector: QueryVector, workspace_id: str, dim: int) -> NDArray[np.float32]:
    """A query vector checked against the workspace's dimension, as a unit float32 vector."""
    query = np.asarray(vector, dtype=np.float32)
    if query.ndim != 1:
        raise InvalidRequestError("a query vector must be one-dimensional")
    if query.shape[0] != dim:
        raise dimension_error(workspace_id, dim, query.shape[0], "the query vector")
    unit: NDArray[np.float32] = normalise_rows(query[None, :].copy(), what="the query vector")[0]
    return unit


def exact_top(nodes: Sequence[VectorNode], query: NDArray[np.float32], top_k: int) -> list[SearchHit]:
    """The `top_k` nodes closest to `query` by cosine (nodes carry unit vectors), without their vectors."""
    candidates = [(node, node.vector) for node in nodes if node.vector is not None]
    if not candidates or top_k <= 0:
        return []
    matrix = np.stack([vector for _, vector in candidates]).astype(np.float32)
    scores = matrix @ query
    order = np.argsort(-scores, kind="stable")[:top_k]
    return [
        SearchHit(node=candidates[i][0].model_copy(update={"vector": None}), score=min(max(float(scores[i]), 0.0), 1.0))
        for i in order.tolist()
    ]
