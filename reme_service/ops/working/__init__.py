"""Working-memory ops: offloading a message list to files (compaction, compression), writing those files inside
the working-memory root, grep and read over them, and the agent loops that use them (`agentic_retrieve`, `react`).
"""

from __future__ import annotations

from reme_service.flow.op import AnyOp
from reme_service.ops.working.agentic_retrieve_op import AgenticRetrieveOp
from reme_service.ops.working.batch_write_file_op import BatchWriteFileOp
from reme_service.ops.working.grep_op import GrepOp
from reme_service.ops.working.message_offload_op import MessageOffloadOp
from reme_service.ops.working.react_search_op import ReactSearchOp
from reme_service.ops.working.read_file_op import ReadFileOp

WORKING_OPS: tuple[type[AnyOp], ...] = (
    MessageOffloadOp,
    BatchWriteFileOp,
    GrepOp,
    ReadFileOp,
    AgenticRetrieveOp,
    ReactSearchOp,
)
