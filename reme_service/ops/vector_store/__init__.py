"""Ops that talk to the vector store directly: recall and the `vector_store` actions."""

from __future__ import annotations

from reme_service.flow.op import AnyOp
from reme_service.ops.vector_store.recall_vector_store_op import RecallVectorStoreOp
from reme_service.ops.vector_store.vector_store_action_op import VectorStoreActionOp

VECTOR_STORE_OPS: tuple[type[AnyOp], ...] = (RecallVectorStoreOp, VectorStoreActionOp)
