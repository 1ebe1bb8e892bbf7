"""GetObservationWithTimeOp: observations from kept statements that mention time, with the time they refer to.

Each message is shown with the time it was said, so relative dates can be resolved against it (not against
"now"). LLM reply contract, one line per observation: `Information: <n> | <time> | <information> | <keywords>`,
where `<time>` is `YYYY-MM-DD`, `YYYY-MM`, `YYYY`, a range `YYYY-MM-DD..YYYY-MM-DD`, or `none`. A time written
another way is read with the rule parser against the message's time. Without an LLM, the first time expression
of the statement is resolved by the rules. Output key `OBSERVATIONS_WITH_TIME`.
"""

from __future__ import annotations

from typing import ClassVar

from reme_service.flow.context import Key
from reme_service.ops.personal import keys
from reme_service.ops.personal.observation_base import ObservationBaseOp
from reme_service.schema.memory import PersonalMemory


class GetObservationWithTimeOp(ObservationBaseOp):
    prompts = {"get_observation_with_time": {"user_name", "count", "sentences"}}
    writes = (keys.OBSERVATIONS_WITH_TIME,)
    with_time: ClassVar[bool] = True
    prompt_name: ClassVar[str] = "get_observation_with_time"
    output_key: ClassVar[Key[list[PersonalMemory]]] = keys.OBSERVATIONS_WITH_TIME
