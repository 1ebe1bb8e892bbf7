"""What every op family shares: the op base (`op.ServiceOp`), the context (`context.ServiceContext`), shared
context keys (`keys`) and request fields (`fields`), and the ops every memory kind uses."""

from __future__ import annotations

from reme_service.flow.op import AnyOp
from reme_service.ops.common.update_vector_store_op import UpdateVectorStoreOp

COMMON_OPS: tuple[type[AnyOp], ...] = (UpdateVectorStoreOp,)
