"""Per-flow request models, generated from each flow's declared `input_schema`.

Base fields every flow accepts: `workspace_id`, `query`, `messages`, `metadata`. Declared fields add types,
required-ness, enums and bounds. Unknown extra keys are accepted and ignored, as ReMe clients may send them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from reme_service.config.models import FlowConfig, InputField
from reme_service.schema.memory import ToolCallResult
from reme_service.schema.messages import Message, Trajectory


class FlowRequest(BaseModel):
    """Fields every flow accepts."""

    model_config = ConfigDict(extra="ignore")

    workspace_id: str = Field(default="", description="the workspace (tenant) to read and write")
    query: str = Field(default="", description="the query text")
    messages: list[Message] = Field(default_factory=list, description="OpenAI-style chat messages")
    metadata: dict[str, Any] = Field(default_factory=dict, description="free-form request metadata")


ITEM_SCHEMAS: dict[str, Any] = {
    "Message": Message,
    "Trajectory": Trajectory,
    "ToolCallResult": ToolCallResult,
    "string": str,
    "object": dict[str, Any],
    "integer": int,
    "number": float,
}

_SCALARS: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict[str, Any],
    "any": Any,
}


def _field_type(spec: InputField) -> Any:
    if spec.enum:
        return Literal[tuple(spec.enum)]
    if spec.type == "array":
        if spec.items is None:
            return list[Any]
        if spec.items not in ITEM_SCHEMAS:
            raise ValueError(f"unknown item schema {spec.items!r}; valid: {', '.join(ITEM_SCHEMAS)}")
        return list[ITEM_SCHEMAS[spec.items]]  # type: ignore[misc]
    return _SCALARS[spec.type]


def build_request_model(flow_name: str, flow: FlowConfig) -> type[FlowRequest]:
    fields: dict[str, Any] = {}
    for name, spec in flow.input_schema.items():
        annotation = _field_type(spec)
        constraints: dict[str, Any] = {"description": spec.description or None}
        if spec.minimum is not None:
            constraints["ge"] = spec.minimum
        if spec.maximum is not None:
            constraints["le"] = spec.maximum
        if spec.exclusive_minimum is not None:
            constraints["gt"] = spec.exclusive_minimum
        if spec.min_items is not None:
            constraints["min_length"] = spec.min_items
        if spec.required:
            fields[name] = (annotation, Field(..., **constraints))
        else:
            fields[name] = (annotation | None, Field(default=spec.default, **constraints))
    model_name = "".join(part.capitalize() for part in flow_name.split("_")) + "Request"
    return create_model(model_name, __base__=FlowRequest, **fields)
