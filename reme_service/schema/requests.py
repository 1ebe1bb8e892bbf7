"""Per-flow request models, generated from each flow's declared `input_schema`.

Base fields every flow accepts: `workspace_id`, `query`, `messages`, `metadata`. Declared fields add types,
required-ness, enums and bounds. Unknown extra keys are accepted and ignored, as ReMe clients may send them.

Before any field is validated, the values of the declared fields are checked against the limits of
`schema.json_limits` (64-bit integers, nesting depth, valid Unicode): a request that breaks one is a 422 at the
offending location, before any op runs or writes anything. A `string` field may name a string schema in `items`
(`FilePath`: a path the file system can take).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    create_model,
    model_validator,
)
from pydantic_core import PydanticCustomError

from reme_service.config.models import FlowConfig, InputField
from reme_service.schema.json_limits import check_json_values
from reme_service.schema.memory import ToolCallResult
from reme_service.schema.messages import Message, Trajectory
from reme_service.schema.paths import FilePath
from reme_service.schema.workspace_ids import DESCRIPTION as WORKSPACE_ID_DESCRIPTION, WORKSPACE_ID_PATTERN

# What the stores accept as a workspace id (`stores.workspace_ids`, which also refuses ids made of dots only and
# non-printable characters). Shown in the OpenAPI document; enforced by the flows that use a workspace, with a 400
# naming the field, as ReMe 0.2 clients expect ("" is the default of the flows that do not use one).


class FlowRequest(BaseModel):
    """Fields every flow accepts."""

    model_config = ConfigDict(extra="ignore")

    workspace_id: StrictStr = Field(
        default="",
        description=f"the workspace (tenant) to read and write: {WORKSPACE_ID_DESCRIPTION}",
        json_schema_extra={"pattern": WORKSPACE_ID_PATTERN, "maxLength": 256},
    )
    query: StrictStr = Field(default="", description="the query text")
    messages: list[Message] = Field(default_factory=list, description="OpenAI-style chat messages")
    metadata: dict[str, Any] = Field(default_factory=dict, description="free-form request metadata")

    @model_validator(mode="before")
    @classmethod
    def _within_json_limits(cls, data: Any) -> Any:
        """Refuse out-of-range integers, too-deep nesting and lone surrogates in the declared fields (422)."""
        if isinstance(data, Mapping):
            declared = {name: data[name] for name in cls.model_fields if name in data}
            check_json_values(declared, cls.__name__)
        return data


def parse_tool_names(value: str | list[str]) -> list[str]:
    """Tool names from `"a, b"` or `["a", "b"]`: trimmed, empty parts dropped, duplicates removed (first kept).

    Raises `PydanticCustomError` (a `ValueError`) when no name is left: a request-schema error, so HTTP 422.
    """
    parts = value.split(",") if isinstance(value, str) else value
    names = list(dict.fromkeys(part.strip() for part in parts if part.strip()))
    if not names:
        raise PydanticCustomError(
            "tool_names_empty", "at least one tool name is required (a comma-separated string or a list of names)"
        )
    return names


# A field that takes several shapes: declared `type: any` with `items: ToolNames` in a flow's input_schema.
ToolNames = Annotated[str | list[str], AfterValidator(parse_tool_names)]

ITEM_SCHEMAS: dict[str, Any] = {
    "Message": Message,
    "Trajectory": Trajectory,
    "ToolCallResult": ToolCallResult,
    "string": StrictStr,
    "object": dict[str, Any],
    "integer": StrictInt,
    "number": StrictFloat,
    "ToolNames": ToolNames,
    "FilePath": FilePath,
}

# Strict scalars: ReMe's clients send JSON numbers and strings, so `"5"` or `5.0` for an integer and `"0.5"` for a
# number are client bugs that lax coercion hid (422 naming the field). An integer is a number (5 for a float is
# fine). Fields an LLM fills in a tool call are declared `lax` and keep the coercion (`_LAX_SCALARS`).
_SCALARS: dict[str, Any] = {
    "string": StrictStr,
    "integer": StrictInt,
    "number": StrictFloat,
    # strict: ReMe's clients send JSON booleans (`update_utility = reward == 1`); a 0, 1 or "yes" is a client bug
    # that lax coercion hid (`"update_utility": 0` was read as false)
    "boolean": StrictBool,
    "object": dict[str, Any],
    "any": Any,
}

_LAX_SCALARS: dict[str, Any] = {"integer": int, "number": float}


def _field_type(spec: InputField, schemas: Mapping[str, Any]) -> Any:
    if spec.enum:
        return Literal[tuple(spec.enum)]
    if spec.type == "array":
        if spec.items is None:
            return list[Any]
        if spec.items not in schemas:
            raise ValueError(f"unknown item schema {spec.items!r}; valid: {', '.join(schemas)}")
        return types.GenericAlias(list, (schemas[spec.items],))  # list[<that schema>], built at run time
    if spec.type == "any" and spec.items is not None:
        # `items` on an `any` field names the schema of the value itself (e.g. ToolNames: a string or a list).
        if spec.items not in schemas:
            raise ValueError(f"unknown value schema {spec.items!r}; valid: {', '.join(schemas)}")
        return schemas[spec.items]
    if spec.type == "string" and spec.items is not None:
        # `items` on a `string` field names a constrained string type (e.g. FilePath).
        if spec.items not in schemas:
            raise ValueError(f"unknown string schema {spec.items!r}; valid: {', '.join(schemas)}")
        return schemas[spec.items]
    if spec.lax and spec.type in _LAX_SCALARS:
        return _LAX_SCALARS[spec.type]
    return _SCALARS[spec.type]


class BackgroundFlowRequest(FlowRequest):
    """The base of flows declared `background`: `"async": true` asks for a job (HTTP only; docs/jobs.md)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    run_async: StrictBool = Field(
        default=False,
        alias="async",
        description="HTTP: answer 202 at once with a job id (GET /jobs/{job_id} gives the result) instead of waiting",
    )


def _fill_omitted(fills: Mapping[str, tuple[str, Any]]) -> Any:
    """A before-validator giving each left-out field `name` of `fills` its default when the field it is
    `optional_with` was sent non-empty (ReMe's Python mode: `retrieve_task_memory` with `messages` only)."""

    def fill(cls: type[BaseModel], data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        missing = {name: default for name, (other, default) in fills.items() if name not in data and data.get(other)}
        return {**data, **missing} if missing else data

    return model_validator(mode="before")(fill)


def build_request_model(
    flow_name: str, flow: FlowConfig, item_schemas: Mapping[str, Any] | None = None
) -> type[FlowRequest]:
    """The request model of one flow. `item_schemas` adds named schemas (ops families contribute their own)."""
    schemas = {**ITEM_SCHEMAS, **(item_schemas or {})}
    fields: dict[str, Any] = {}
    fills = {name: (spec.optional_with, spec.default) for name, spec in flow.input_schema.items() if spec.optional_with}
    for name, spec in flow.input_schema.items():
        annotation = _field_type(spec, schemas)
        constraints: dict[str, Any] = {"description": spec.description or None}
        if spec.minimum is not None:
            constraints["ge"] = spec.minimum
        if spec.maximum is not None:
            constraints["le"] = spec.maximum
        if spec.exclusive_minimum is not None:
            constraints["gt"] = spec.exclusive_minimum
        if spec.min_items is not None:
            constraints["min_length"] = spec.min_items
        if spec.max_length is not None:  # enforced by the op, with its own error: stated here, not checked twice
            constraints["json_schema_extra"] = {"maxLength": spec.max_length}
        if spec.required:
            fields[name] = (annotation, Field(..., **constraints))
        else:
            fields[name] = (annotation | None, Field(default=spec.default, **constraints))
    model_name = "".join(part.capitalize() for part in flow_name.split("_")) + "Request"
    base = BackgroundFlowRequest if flow.background else FlowRequest
    validators = {"_fill_omitted": _fill_omitted(fills)} if fills else None
    return create_model(model_name, __base__=base, __validators__=validators, **fields)
