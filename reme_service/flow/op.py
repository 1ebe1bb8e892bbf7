"""The `Op` base class and the composition operators `>>` (sequence) and `|` (parallel).

An op is a small async step with validated parameters. `Op[P, C]` is generic over its parameter model `P` (the
class named in the subscript becomes `Params`, so it is spelled once) and the context type `C` its `run` takes.
It declares what it touches:

- `inputs`: the request fields it reads (`Input`), checked against each flow's request model at start-up;
  `may_input`: fields it reads when the flow declares them (type-checked then), else their default;
- `reads`: context keys an earlier op must have written; `may_read`: keys it reads when present;
- `writes`: context keys it writes.

Composition never mutates its operands: `a >> b` returns a new flattened `Sequential`, `a | b` a new flattened
`Parallel`, and `repr()` prints the DSL back.
"""

from __future__ import annotations

import typing
from abc import abstractmethod
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from reme_service.flow.context import C, FlowContext, Input, Key


class OpParams(BaseModel):
    """Parameters every op accepts; subclasses add their own. Unknown names are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: parameters accepted so that other engines' flow expressions start, and ignored: name -> why. The app logs
    #: one warning per op that sets one (`ignored_set`).
    ignored: ClassVar[Mapping[str, str]] = MappingProxyType({})

    on_error: Literal["raise", "skip"] = "raise"

    def ignored_set(self) -> dict[str, str]:
        """The ignored parameters this op was given, with why each is ignored."""
        return {name: why for name, why in self.ignored.items() if name in self.model_fields_set}


P = TypeVar("P", bound=OpParams)


class Node:
    """Anything that can be composed: an op, a sequence or a parallel group."""

    def __rshift__(self, other: Node) -> Sequential:
        return Sequential(*_flatten(self, Sequential), *_flatten(other, Sequential))

    def __or__(self, other: Node) -> Parallel:
        return Parallel(*_flatten(self, Parallel), *_flatten(other, Parallel))

    def ops(self) -> list[AnyOp]:
        """Every op in the tree, depth first."""
        if isinstance(self, Op):
            return [self]
        assert isinstance(self, Group)
        return [op for child in self.children for op in child.ops()]


class Group(Node):
    """A sequence or a parallel group of at least two children."""

    symbol: ClassVar[str] = ""

    def __init__(self, *children: Node) -> None:
        if len(children) < 2:
            raise ValueError(f"{type(self).__name__} needs at least two children")
        self.children: tuple[Node, ...] = children

    def __repr__(self) -> str:
        parts = [f"({c!r})" if isinstance(c, Group) else repr(c) for c in self.children]
        return f" {self.symbol} ".join(parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Group) and type(self) is type(other) and self.children == other.children

    def __hash__(self) -> int:
        return hash((type(self), self.children))


class Sequential(Group):
    """Children run one after another on the same context."""

    symbol = ">>"


class Parallel(Group):
    """Children run concurrently on the same context; each writes distinct keys. One failure fails the group."""

    symbol = "|"


def _flatten(node: Node, kind: type[Group]) -> tuple[Node, ...]:
    return node.children if isinstance(node, kind) else (node,)


def _params_from_bases(cls: type) -> type[OpParams] | None:
    """The `OpParams` subclass named in `class X(Base[XParams])`, if any."""
    for base in getattr(cls, "__orig_bases__", ()):
        for arg in typing.get_args(base):
            if isinstance(arg, type) and issubclass(arg, OpParams):
                return arg
    return None


class Op(Node, Generic[P, C]):
    """Base of every op. Subclasses name their params model in the subscript and implement `run`.

    The class name is the name flows use (`BuildQueryOp`); it must end with `Op`.
    """

    Params: ClassVar[type[OpParams]] = OpParams
    name: ClassVar[str] = "Op"
    inputs: ClassVar[tuple[Input[Any], ...]] = ()
    may_input: ClassVar[tuple[Input[Any], ...]] = ()
    reads: ClassVar[tuple[Key[Any], ...]] = ()
    may_read: ClassVar[tuple[Key[Any], ...]] = ()
    writes: ClassVar[tuple[Key[Any], ...]] = ()
    # derived from the declarations above when the class is created
    input_names: ClassVar[frozenset[str]] = frozenset()
    readable_keys: ClassVar[frozenset[str]] = frozenset()
    writable_keys: ClassVar[frozenset[str]] = frozenset()
    # non-empty when the op may raise NotFoundError (404): what may be missing, listed as the flow's 404 in OpenAPI
    not_found: ClassVar[str] = ""

    params: P

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        params = _params_from_bases(cls)
        if params is not None:
            cls.Params = params
        cls.name = cls.__name__
        cls.input_names = frozenset(spec.name for spec in (*cls.inputs, *cls.may_input))
        cls.writable_keys = frozenset(key.name for key in cls.writes)
        cls.readable_keys = frozenset(key.name for key in (*cls.reads, *cls.may_read)) | cls.writable_keys
        if not cls.__name__.endswith("Op"):
            raise TypeError(f"op class names end with 'Op': {cls.__name__}")

    def __init__(self, **params: Any) -> None:
        self.params = typing.cast(P, self.Params(**params))

    @classmethod
    def from_params(cls, params: OpParams) -> Op[P, C]:
        """A fresh instance sharing already-validated (frozen) params — one per request."""
        op = cls.__new__(cls)
        op.params = typing.cast(P, params)
        return op

    @abstractmethod
    async def run(self, ctx: C) -> None:
        """Read from and write to the context."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.model_dump(exclude_defaults=True).items())
        return f"{self.name}({args})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Op) and type(self) is type(other) and self.params == other.params

    def __hash__(self) -> int:
        return hash((type(self), repr(self)))


AnyOp = Op[Any, Any]
"""An op of any params and context type (what the engine walks)."""

__all__ = ["AnyOp", "FlowContext", "Group", "Node", "Op", "OpParams", "P", "Parallel", "Sequential"]
