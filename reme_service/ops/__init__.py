"""Every op the flows may name. The op registry is built from `ALL_OPS`, not from import side effects.

Each family package (`task`, `personal`, `tool`, `working`, `vector_store`, `common`) lists its ops in one
tuple; a new op is added to its family's tuple.
"""

from __future__ import annotations

from typing import Any

from reme_service.flow.op import AnyOp
from reme_service.ops.common import COMMON_OPS
from reme_service.ops.personal import PERSONAL_ITEM_SCHEMAS, PERSONAL_OPS
from reme_service.ops.task import TASK_OPS
from reme_service.ops.tool import TOOL_OPS
from reme_service.ops.vector_store import VECTOR_STORE_OPS
from reme_service.ops.working import WORKING_OPS

ALL_OPS: tuple[type[AnyOp], ...] = (
    *COMMON_OPS,
    *TASK_OPS,
    *PERSONAL_OPS,
    *TOOL_OPS,
    *WORKING_OPS,
    *VECTOR_STORE_OPS,
)

# Named request item schemas contributed by op families (see schema/requests.py ITEM_SCHEMAS for the base ones).
OP_ITEM_SCHEMAS: dict[str, Any] = {**PERSONAL_ITEM_SCHEMAS}
