"""The per-request context ops share: validated request fields, typed intermediate keys and the response."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from reme_service.services import Services

T = TypeVar("T")
_MISSING: Any = object()


@dataclass(frozen=True)
class Key(Generic[T]):
    """A typed name for a value ops pass to each other (aiohttp's `AppKey` idea)."""

    name: str


class FlowResponse(BaseModel):
    """The response envelope every flow returns (ReMe 0.2's `FlowResponse`)."""

    answer: Any = Field(default="", description="the flow's main result: text, or JSON for some flows")
    success: bool = Field(default=True, description="false on any failure (then metadata.error says why)")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="structured results (memory_list, action_result, ...) or `error`"
    )


class FlowContext:
    """What one request's ops read and write. Created by the runner; never shared between requests."""

    def __init__(
        self,
        *,
        flow_name: str,
        request_id: str,
        fields: dict[str, Any],
        services: Services,
        workspace_id: str,
        language: str = "",
    ) -> None:
        self.flow_name = flow_name
        self.request_id = request_id
        self.fields = fields
        self.services = services
        self.workspace_id = workspace_id
        self.language = language
        self.response = FlowResponse()
        self._data: dict[str, Any] = {}

    def field(self, name: str, default: Any = None) -> Any:
        """A request field (declared in the flow's input schema or a base field)."""
        value = self.fields.get(name, default)
        return default if value is None else value

    def __getitem__(self, key: Key[T]) -> T:
        try:
            return cast(T, self._data[key.name])
        except KeyError:
            raise KeyError(f"context key '{key.name}' was not written by an earlier op") from None

    def __setitem__(self, key: Key[T], value: T) -> None:
        self._data[key.name] = value

    def __contains__(self, key: Key[Any]) -> bool:
        return key.name in self._data

    def get(self, key: Key[T], default: T) -> T:
        return cast(T, self._data.get(key.name, default))

    def note(self, key: str, value: Any) -> None:
        """Append `value` to the list `response.metadata[key]` (e.g. which ops took their no-LLM path)."""
        self.response.metadata.setdefault(key, []).append(value)

    def without_llm(self, op_name: str) -> None:
        """Record that an op ran its deterministic no-LLM path."""
        self.note("no_llm_ops", op_name)
