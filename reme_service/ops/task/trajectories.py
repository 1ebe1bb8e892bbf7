"""Reading trajectories from a request, and the parts of a trajectory the summary ops look at.

A trajectory's task statement is `metadata.query` (ReMe's convention), else its first user message. Its
optional `metadata.segments` is a list of segments, each a list of messages (as `TrajectorySegmentationOp`
writes them, or as a client sends them); a segment is located in the trajectory to give the extraction
prompts the steps around it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from reme_service.errors import InvalidRequestError, describe_validation_errors
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.task import fields, keys as task_keys
from reme_service.schema.messages import Message, Role, Trajectory

QUERY_LIMIT = 500


def request_trajectories(ctx: ServiceContext) -> list[Trajectory]:
    """The trajectories of the request, checked: a non-empty list, each with at least one message.

    Reuses what `TrajectoryPreprocessOp` already checked when it ran earlier in the flow. An op that calls this
    declares `fields.TRAJECTORIES` in `inputs` and `task_keys.ALL_TRAJECTORIES` in `may_read`.
    """
    if task_keys.ALL_TRAJECTORIES in ctx:
        return ctx[task_keys.ALL_TRAJECTORIES]
    trajectories = ctx.input(fields.TRAJECTORIES)
    if not trajectories:
        raise InvalidRequestError(
            "'trajectories' is empty: send at least one trajectory (messages and a score)",
            details={"field": "trajectories"},
        )
    for index, trajectory in enumerate(trajectories):
        if not trajectory.messages:
            raise InvalidRequestError(
                f"trajectories[{index}] has no messages", details={"field": f"trajectories[{index}].messages"}
            )
        segments_of(trajectory, index)  # validates metadata.segments up front
    return list(trajectories)


def task_query(trajectory: Trajectory) -> str:
    """The task statement: `metadata.query`, else the first user message, cut to `QUERY_LIMIT` characters."""
    query = trajectory.metadata.get("query")
    text = query.strip() if isinstance(query, str) else ""
    if not text:
        text = next((m.text.strip() for m in trajectory.messages if m.role is Role.USER and m.text.strip()), "")
    return text if len(text) <= QUERY_LIMIT else text[:QUERY_LIMIT] + "..."


@dataclass(frozen=True)
class Segment:
    """A run of steps to learn from, and where it sits in its trajectory (`start` None: not located)."""

    messages: list[Message]
    start: int | None


def segments_of(trajectory: Trajectory, index: int = 0) -> list[Segment]:
    """`metadata.segments` as located segments, or the whole trajectory as one segment when there are none."""
    raw = trajectory.metadata.get("segments")
    if not raw:
        return [Segment(list(trajectory.messages), 0)]
    field = f"trajectories[{index}].metadata.segments"
    if not isinstance(raw, list):
        raise InvalidRequestError(f"{field} must be a list of message lists", details={"field": field})
    segments: list[Segment] = []
    for number, part in enumerate(raw):
        if not isinstance(part, list) or not part:
            raise InvalidRequestError(
                f"{field}[{number}] must be a non-empty list of messages", details={"field": field}
            )
        try:
            messages = [m if isinstance(m, Message) else Message.model_validate(m) for m in part]
        except ValidationError as exc:
            raise InvalidRequestError(
                describe_validation_errors(exc, prefix=f"{field}[{number}]: ", limit=1), details={"field": field}
            ) from None
        segments.append(Segment(messages, _locate(trajectory.messages, messages)))
    return segments


def _locate(messages: Sequence[Message], part: Sequence[Message]) -> int | None:
    """Where `part` starts as a contiguous run of `messages` (compared by role and text), or None."""
    keys = [(m.role, m.text) for m in messages]
    wanted = [(m.role, m.text) for m in part]
    for start in range(len(keys) - len(wanted) + 1):
        if keys[start : start + len(wanted)] == wanted:
            return start
    return None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def segment_context(trajectory: Trajectory, segment: Segment, *, around: int = 2, limit: int = 100) -> str:
    """The task and up to `around` steps before and after the segment, each cut to `limit` characters."""
    lines = [f"Task: {task_query(trajectory) or '(not stated)'}"]
    if segment.start is not None:
        messages = trajectory.messages
        end = segment.start + len(segment.messages)
        before = messages[max(0, segment.start - around) : segment.start]
        after = messages[end : end + around]
        lines += [f"Before: {m.role.value}: {_cut(m.text, limit)}" for m in before]
        lines += [f"After: {m.role.value}: {_cut(m.text, limit)}" for m in after]
    return "\n".join(lines)


def trajectory_info(trajectory: Trajectory) -> dict[str, Any]:
    """What a memory records about its source trajectory."""
    return {"task_id": trajectory.task_id, "trajectory_score": trajectory.score}
