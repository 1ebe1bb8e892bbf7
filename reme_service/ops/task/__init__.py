"""Task-memory ops: building queries, reranking, rewriting and (later) summarising trajectories."""

from __future__ import annotations

from reme_service.flow.op import Op
from reme_service.ops.task.build_query_op import BuildQueryOp
from reme_service.ops.task.merge_memory_op import MergeMemoryOp
from reme_service.ops.task.rerank_memory_op import RerankMemoryOp
from reme_service.ops.task.rewrite_memory_op import RewriteMemoryOp

TASK_OPS: tuple[type[Op], ...] = (BuildQueryOp, MergeMemoryOp, RerankMemoryOp, RewriteMemoryOp)
