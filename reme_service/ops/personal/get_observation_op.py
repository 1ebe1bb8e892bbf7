"""GetObservationOp: observations about the user from kept statements that do not mention time.

LLM reply contract, one line per observation (several per message allowed, `None` for a message that holds
nothing about the user): `Information: <n> | <information> | <keywords, comma-separated>`. Without an LLM,
each statement becomes one observation in the user's own words (see `observation_base.py`). Output key
`OBSERVATIONS`.
"""

from __future__ import annotations

from typing import ClassVar

from reme_service.flow.context import Key
from reme_service.ops.personal import keys
from reme_service.ops.personal.observation_base import ObservationBaseOp
from reme_service.schema.memory import PersonalMemory


class GetObservationOp(ObservationBaseOp):
    prompts = {"get_observation": {"user_name", "count", "sentences"}}
    writes = (keys.OBSERVATIONS,)
    with_time: ClassVar[bool] = False
    prompt_name: ClassVar[str] = "get_observation"
    output_key: ClassVar[Key[list[PersonalMemory]]] = keys.OBSERVATIONS
