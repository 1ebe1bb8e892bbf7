"""Request item schemas of the personal-memory flows: messages and trajectories whose times are validated.

`PersonalMessage` is a `Message` whose `time_created` must be a time `parse_timestamp` reads (it is normalised
to `YYYY-MM-DD HH:MM:SS`; empty means "not given"). Its `content` may be empty, as in ReMe 0.2 (an agent's empty
system prompt, a blank user turn): such a message says nothing, and the ops that read user messages
(`InfoFilterOp`, `SetQueryOp`) skip it. `PersonalTrajectory` holds such messages and may carry its own
`time_created` (or `timestamp`), used for messages without one. Both are registered as request item schemas
(`PERSONAL_ITEM_SCHEMAS` in `ops/personal/__init__.py`), so a bad time is a 422 whose `loc` names the field
(`["body", "messages", 0, "time_created"]`). `Timestamp` validates a single time field the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypeVar

from pydantic import AliasChoices, BaseModel, BeforeValidator, Field, ValidationError, field_validator

from reme_service.errors import InvalidRequestError, describe_validation_errors
from reme_service.retrieval.timestamps import normalise_timestamp
from reme_service.schema.messages import Message, Trajectory


def _timestamp(value: Any) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        return ""
    return normalise_timestamp(value)


# A single time value (`query_time`): declared `type: any` with `items: Timestamp` in a flow's input_schema.
Timestamp = Annotated[str, BeforeValidator(_timestamp)]


class PersonalMessage(Message):
    """A chat message of a personal conversation."""

    content: str | list[dict[str, Any]] | None = Field(
        default="", description="the text, or OpenAI content blocks; a message without text is skipped"
    )
    time_created: str = Field(
        default="",
        description="when the message was said: '2023-05-08 13:56:00', ISO 8601, epoch seconds or a written date",
    )

    @field_validator("time_created", mode="before")
    @classmethod
    def _check_time(cls, value: Any) -> str:
        return _timestamp(value)


class PersonalTrajectory(Trajectory):
    """A conversation: its messages and, optionally, the time it took place."""

    # pydantic narrows the inherited field to the timed messages; mypy sees a `list` override (lists are invariant)
    messages: list[PersonalMessage] = Field(  # type: ignore[assignment]
        default_factory=list, description="the conversation's messages"
    )
    time_created: str = Field(
        default="",
        validation_alias=AliasChoices("time_created", "timestamp"),
        description="the time of the conversation, used for messages that carry none",
    )

    @field_validator("time_created", mode="before")
    @classmethod
    def _check_time(cls, value: Any) -> str:
        return _timestamp(value)


M = TypeVar("M", bound=BaseModel)


def personal_items(model: type[M], items: Sequence[object], field: str) -> list[M]:
    """`items` as `model` objects. Items the request model already validated as `model` (the personal flows
    declare `items: PersonalMessage` / `PersonalTrajectory`) are taken as they are; the others — plain `Message`
    or `Trajectory` objects, or dicts, when a flow declared the field without these schemas — are validated
    here, and a bad one is a 400 naming its path (`messages.0.time_created`), never a 500."""
    out: list[M] = []
    for i, raw in enumerate(items):
        if isinstance(raw, model):
            out.append(raw)
            continue
        data = raw.model_dump(exclude_unset=True) if isinstance(raw, BaseModel) else raw
        try:
            out.append(model.model_validate(data))
        except ValidationError as exc:
            path = ".".join(str(part) for part in (field, i, *exc.errors()[0]["loc"]))
            message = describe_validation_errors(exc, prefix=f"invalid {field}.{i}.", limit=1)
            raise InvalidRequestError(message, details={"field": path}) from None
    return out
