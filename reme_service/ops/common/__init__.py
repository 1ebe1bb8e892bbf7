"""Ops shared by every memory kind."""

from __future__ import annotations

from reme_service.flow.op import Op
from reme_service.ops.common.update_vector_store_op import UpdateVectorStoreOp

COMMON_OPS: tuple[type[Op], ...] = (UpdateVectorStoreOp,)
