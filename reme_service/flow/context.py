"""What one request's ops share: the validated request, typed intermediate values and the response.

An op names what it touches: the request fields it reads (`Input`), the context keys it reads (`Key`, in
`reads` when an earlier op must have written it, in `may_read` when it copes with its absence) and the keys it
writes. The runner hands each op a view of the context bound to those declarations, so an op that reaches for
anything it did not declare fails loudly in the first test that runs it, and `check.py` can prove at start-up
that every flow gives each op what it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, Self, TypeVar, cast

from pydantic import BaseModel, Field

from reme_service.errors import UndeclaredAccessError


class Declarations(Protocol):
    """What a context view checks an op's accesses against: the names it declared (`flow.op.Op` has them)."""

    @property
    def name(self) -> str: ...

    @property
    def input_names(self) -> frozenset[str]: ...

    @property
    def readable_keys(self) -> frozenset[str]: ...

    @property
    def writable_keys(self) -> frozenset[str]: ...


T = TypeVar("T")


@dataclass(frozen=True)
class Key(Generic[T]):
    """A typed name for a value ops pass to each other (aiohttp's `AppKey` idea)."""

    name: str


@dataclass(frozen=True)
class Input(Generic[T]):
    """A request field an op reads, with the Python type it expects and the value it uses when the field is absent.

    `type` is checked against the flow's request model when the app is built (a field the model does not declare
    stops the start). Use `factory` for a mutable default (`Input("messages", list[Message], factory=list)`).
    """

    name: str
    type: Any
    default: T | None = None
    factory: Callable[[], T] | None = field(default=None, compare=False)

    def fallback(self) -> T:
        if self.factory is not None:
            return self.factory()
        return cast(T, self.default)


class FlowResponse(BaseModel):
    """The response envelope every flow returns (ReMe 0.2's `FlowResponse`)."""

    answer: Any = Field(default="", description="the flow's main result: text, or JSON for some flows")
    success: bool = Field(default=True, description="false on any failure (then metadata.error says why)")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="structured results (memory_list, action_result, ...) or `error`"
    )


class FlowContext:
    """What one request's ops read and write. Created per request by the app's context factory; never shared
    between requests. Each op receives a view bound to its declarations (`bind`); the views share one store of
    values and one response."""

    def __init__(self, *, flow_name: str, request_id: str, request: BaseModel) -> None:
        self.flow_name = flow_name
        self.request_id = request_id
        self.request = request
        self.response = FlowResponse()
        self._data: dict[str, Any] = {}
        self._op: Declarations | None = None
        self._finished: list[bool] = [False]  # shared by every view (a list, so `bind`'s copies see one flag)

    def finish(self) -> None:
        """End the flow after this op: the runner starts no further op (branches already running complete). The
        response is what the ops wrote so far, e.g. an empty result with a `metadata.warning`."""
        self._finished[0] = True

    @property
    def finished(self) -> bool:
        return self._finished[0]

    def bind(self, op: Declarations) -> Self:
        """A view of this context that allows exactly what `op` declares (same values, same response)."""
        view = object.__new__(type(self))  # a shallow copy, without copy.copy's reduce protocol (one per op run)
        view.__dict__.update(self.__dict__)
        view._op = op
        return view

    def _check(self, kind: str, name: str, allowed: frozenset[str]) -> None:
        op = self._op
        if op is not None and name not in allowed:
            raise UndeclaredAccessError(f"{op.name} uses {kind} '{name}' without declaring it")

    def input(self, spec: Input[T]) -> T:
        """A request field: its validated value, or the spec's default when the request left it out (or null)."""
        if self._op is not None:
            self._check("request field", spec.name, self._op.input_names)
        value = getattr(self.request, spec.name, None)
        return spec.fallback() if value is None else cast(T, value)

    def __getitem__(self, key: Key[T]) -> T:
        if self._op is not None:
            self._check("context key", key.name, self._op.readable_keys)
        try:
            return cast(T, self._data[key.name])
        except KeyError:
            raise KeyError(f"context key '{key.name}' was not written by an earlier op") from None

    def __setitem__(self, key: Key[T], value: T) -> None:
        if self._op is not None:
            self._check("context key (write)", key.name, self._op.writable_keys)
        self._data[key.name] = value

    def __contains__(self, key: Key[Any]) -> bool:
        if self._op is not None:
            self._check("context key", key.name, self._op.readable_keys)
        return key.name in self._data

    def get(self, key: Key[T], default: T) -> T:
        if self._op is not None:
            self._check("context key", key.name, self._op.readable_keys)
        return cast(T, self._data.get(key.name, default))

    def note(self, key: str, value: Any) -> None:
        """Append `value` to the list `response.metadata[key]` (e.g. which steps were skipped)."""
        self.response.metadata.setdefault(key, []).append(value)


C = TypeVar("C", bound=FlowContext)
