"""Task-memory ops: retrieval (query, rerank, rewrite, merge), summarising trajectories, usage feedback, pruning."""

from __future__ import annotations

from reme_service.flow.op import AnyOp
from reme_service.ops.task.build_query_op import BuildQueryOp
from reme_service.ops.task.comparative_extraction_op import ComparativeExtractionOp
from reme_service.ops.task.delete_memory_op import DeleteMemoryOp
from reme_service.ops.task.failure_extraction_op import FailureExtractionOp
from reme_service.ops.task.memory_deduplication_op import MemoryDeduplicationOp
from reme_service.ops.task.memory_validation_op import MemoryValidationOp
from reme_service.ops.task.merge_memory_op import MergeMemoryOp
from reme_service.ops.task.rerank_memory_op import RerankMemoryOp
from reme_service.ops.task.rewrite_memory_op import RewriteMemoryOp
from reme_service.ops.task.simple_comparative_summary_op import SimpleComparativeSummaryOp
from reme_service.ops.task.simple_summary_op import SimpleSummaryOp
from reme_service.ops.task.success_extraction_op import SuccessExtractionOp
from reme_service.ops.task.trajectory_preprocess_op import TrajectoryPreprocessOp
from reme_service.ops.task.trajectory_segmentation_op import TrajectorySegmentationOp
from reme_service.ops.task.update_memory_freq_op import UpdateMemoryFreqOp

TASK_OPS: tuple[type[AnyOp], ...] = (
    BuildQueryOp,
    MergeMemoryOp,
    RerankMemoryOp,
    RewriteMemoryOp,
    TrajectoryPreprocessOp,
    TrajectorySegmentationOp,
    SuccessExtractionOp,
    FailureExtractionOp,
    ComparativeExtractionOp,
    SimpleComparativeSummaryOp,
    MemoryValidationOp,
    MemoryDeduplicationOp,
    SimpleSummaryOp,
    UpdateMemoryFreqOp,
    DeleteMemoryOp,
)
