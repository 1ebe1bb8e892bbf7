"""Request fields the personal-memory ops read (the shared ones are in `ops/common/fields.py`).

`trajectories` and `messages` are read as the request model holds them: the personal flows declare their items
as `PersonalTrajectory` / `PersonalMessage`, and `timed_messages.personal_items` validates the items of a flow
that left them untyped (or, for `messages`, kept the base field's plain `Message`).

`language` and `query_time` are optional fields declared as an enum and as a `Timestamp`; their specs name that
declared type, `None` included, because `flow/check.py` only matches an optional enum or `Annotated` field
against a spec of the same form (a spec of `str` is refused).
"""

from __future__ import annotations

from typing import Literal

from reme_service.flow.context import Input
from reme_service.ops.personal.timed_messages import PersonalTrajectory, Timestamp

# `list[PersonalTrajectory]`, not `Trajectory`: a plain `Trajectory` drops the conversation's `time_created`, so a
# flow declaring `items: Trajectory` is refused at start-up; untyped items (dicts) are validated by the op
TRAJECTORIES: Input[list[PersonalTrajectory]] = Input("trajectories", list[PersonalTrajectory], factory=list)
USER_NAME: Input[str] = Input("user_name", str, default="")
LANGUAGE: Input[str] = Input("language", Literal["", "en", "zh"] | None, default="")
QUERY_TIME: Input[str] = Input("query_time", Timestamp | None, default="")
# ReMe's default when a flow leaves `top_k` out (the personal flows declare it with default 3)
TOP_K: Input[int] = Input("top_k", int, default=3)
