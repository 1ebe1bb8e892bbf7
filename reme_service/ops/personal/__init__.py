"""Personal-memory ops: observations from user messages, contradiction checks, insights, time-aware retrieval."""

from __future__ import annotations

from typing import Any

from reme_service.flow.op import AnyOp
from reme_service.ops.personal.contra_repeat_op import ContraRepeatOp
from reme_service.ops.personal.extract_time_op import ExtractTimeOp
from reme_service.ops.personal.fuse_rerank_op import FuseRerankOp
from reme_service.ops.personal.get_observation_op import GetObservationOp
from reme_service.ops.personal.get_observation_with_time_op import GetObservationWithTimeOp
from reme_service.ops.personal.get_reflection_subject_op import GetReflectionSubjectOp
from reme_service.ops.personal.info_filter_op import InfoFilterOp
from reme_service.ops.personal.load_personal_memory_op import LoadPersonalMemoryOp
from reme_service.ops.personal.load_today_memory_op import LoadTodayMemoryOp
from reme_service.ops.personal.long_contra_repeat_op import LongContraRepeatOp
from reme_service.ops.personal.retrieve_memory_op import RetrieveMemoryOp
from reme_service.ops.personal.semantic_rank_op import SemanticRankOp
from reme_service.ops.personal.set_query_op import SetQueryOp
from reme_service.ops.personal.set_validity_op import SetValidityOp
from reme_service.ops.personal.stamp_recorded_op import StampRecordedOp
from reme_service.ops.personal.timed_messages import PersonalMessage, PersonalTrajectory, Timestamp
from reme_service.ops.personal.update_insight_op import UpdateInsightOp

PERSONAL_OPS: tuple[type[AnyOp], ...] = (
    InfoFilterOp,
    GetObservationOp,
    GetObservationWithTimeOp,
    LoadTodayMemoryOp,
    ContraRepeatOp,
    StampRecordedOp,
    LoadPersonalMemoryOp,
    GetReflectionSubjectOp,
    UpdateInsightOp,
    LongContraRepeatOp,
    SetQueryOp,
    SetValidityOp,
    ExtractTimeOp,
    RetrieveMemoryOp,
    SemanticRankOp,
    FuseRerankOp,
)

# Named request schemas the personal flows declare in their input_schema (`items: PersonalTrajectory`, ...).
PERSONAL_ITEM_SCHEMAS: dict[str, Any] = {
    "PersonalMessage": PersonalMessage,
    "PersonalTrajectory": PersonalTrajectory,
    "Timestamp": Timestamp,
}
