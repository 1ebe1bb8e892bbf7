"""Request fields the personal-memory ops read (the shared ones are in `ops/common/fields.py`).

`trajectories` and `messages` are read as the request model holds them: the personal flows declare their items
as `PersonalTrajectory` / `PersonalMessage`, and `timed_messages.personal_items` validates the items of a flow
that left them untyped (or, for `messages`, kept the base field's plain `Message`).
"""

from __future__ import annotations

from reme_service.flow.context import Input
from reme_service.ops.personal.timed_messages import PersonalTrajectory

# `list[PersonalTrajectory]`, not `Trajectory`: a plain `Trajectory` drops the conversation's `time_created`, so a
# flow declaring `items: Trajectory` is refused at start-up; untyped items (dicts) are validated by the op
TRAJECTORIES: Input[list[PersonalTrajectory]] = Input("trajectories", list[PersonalTrajectory], factory=list)
USER_NAME: Input[str] = Input("user_name", str, default="")
# declared as an enum ("", "en", "zh") and as a normalised timestamp string: both are read as text
LANGUAGE: Input[str] = Input("language", str, default="")
QUERY_TIME: Input[str] = Input("query_time", str, default="")
# ReMe's default when a flow leaves `top_k` out (the personal flows declare it with default 3)
TOP_K: Input[int] = Input("top_k", int, default=3)
# time validity (docs/personal_memory.md): the moment retrieval reads the facts at, and whether to keep invalid ones
AS_OF: Input[str] = Input("as_of", str, default="")
INCLUDE_INVALID: Input[bool] = Input("include_invalid", bool, default=False)
# seconds new personal memories live; None: the workspace's `lifecycle.ttl_seconds`
TTL: Input[float | None] = Input("ttl", float | None, default=None)
