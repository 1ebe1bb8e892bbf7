"""Context keys the personal-memory ops pass to each other (the shared ones are in `ops/common/keys.py`)."""

from __future__ import annotations

from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from reme_service.flow.context import Key
from reme_service.ops.personal.lifecycle import Validity
from reme_service.ops.personal.memories import Statement
from reme_service.retrieval.timespan import TimeSpan
from reme_service.schema.memory import PersonalMemory

# summary_personal_memory
STATEMENTS: Key[list[Statement]] = Key("personal.statements")
OBSERVATIONS: Key[list[PersonalMemory]] = Key("personal.observations")
OBSERVATIONS_WITH_TIME: Key[list[PersonalMemory]] = Key("personal.observations_with_time")
TODAY_MEMORIES: Key[list[PersonalMemory]] = Key("personal.today_memories")

# reflect_personal_memory
REFLECTION_DUE: Key[bool] = Key("personal.reflection_due")
UNREFLECTED: Key[list[PersonalMemory]] = Key("personal.unreflected_observations")
INSIGHTS: Key[list[PersonalMemory]] = Key("personal.insights")
NEW_SUBJECTS: Key[list[str]] = Key("personal.new_subjects")
UPDATED_INSIGHTS: Key[list[PersonalMemory]] = Key("personal.updated_insights")

# retrieve_personal_memory
QUERY_TIME: Key[datetime] = Key("personal.query_time")
TARGET: Key[str | None] = Key("personal.target")
TIME_SPAN: Key[TimeSpan | None] = Key("personal.time_span")
QUERY_VECTOR: Key[NDArray[np.float32] | None] = Key("personal.query_vector")
#: the BM25 share RetrieveMemoryOp fused with the cosine (`search_hybrid`); None: it ranked by cosine alone
QUERY_LEXICAL_WEIGHT: Key[float | None] = Key("personal.query_lexical_weight")
#: which facts retrieval keeps (`as_of`, or valid now); None with `include_invalid`
VALIDITY: Key[Validity | None] = Key("personal.validity")
