"""The `Op` base class and the composition operators `>>` (sequence) and `|` (parallel).

An op is a small async step with validated parameters. Composition never mutates its operands: `a >> b`
returns a new flattened `Sequential`, `a | b` a new flattened `Parallel`, and `repr()` prints the DSL back.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from reme_service.flow.context import FlowContext


class OpParams(BaseModel):
    """Parameters every op accepts; subclasses add their own. Unknown names are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    on_error: Literal["raise", "skip"] = "raise"


class Node:
    """Anything that can be composed: an op, a sequence or a parallel group."""

    def __rshift__(self, other: Node) -> Sequential:
        return Sequential(*_flatten(self, Sequential), *_flatten(other, Sequential))

    def __or__(self, other: Node) -> Parallel:
        return Parallel(*_flatten(self, Parallel), *_flatten(other, Parallel))

    def ops(self) -> list[Op]:
        """Every op in the tree, depth first."""
        if isinstance(self, Op):
            return [self]
        assert isinstance(self, _Group)
        return [op for child in self.children for op in child.ops()]


class _Group(Node):
    symbol: ClassVar[str] = ""

    def __init__(self, *children: Node) -> None:
        if len(children) < 2:
            raise ValueError(f"{type(self).__name__} needs at least two children")
        self.children: tuple[Node, ...] = children

    def __repr__(self) -> str:
        parts = [f"({c!r})" if isinstance(c, _Group) else repr(c) for c in self.children]
        return f" {self.symbol} ".join(parts)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.children == other.children  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self.children))


class Sequential(_Group):
    """Children run one after another on the same context."""

    symbol = ">>"


class Parallel(_Group):
    """Children run concurrently on the same context; each writes distinct keys. One failure fails the group."""

    symbol = "|"


def _flatten(node: Node, kind: type[_Group]) -> tuple[Node, ...]:
    return node.children if isinstance(node, kind) else (node,)


class Op(Node):
    """Base of every op. Subclasses set `Params` and implement `run`.

    The class name is the name flows use (`BuildQueryOp`); it must end with `Op`.
    """

    Params: ClassVar[type[OpParams]] = OpParams
    name: ClassVar[str] = "Op"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.endswith("Op"):
            raise TypeError(f"op class names end with 'Op': {cls.__name__}")
        cls.name = cls.__name__

    def __init__(self, **params: Any) -> None:
        self.params: OpParams = self.Params(**params)

    @classmethod
    def from_params(cls, params: OpParams) -> Op:
        """A fresh instance sharing already-validated (frozen) params — one per request."""
        op = cls.__new__(cls)
        op.params = params
        return op

    @abstractmethod
    async def run(self, ctx: FlowContext) -> None:
        """Read from and write to the context."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.model_dump(exclude_defaults=True).items())
        return f"{self.name}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.params == other.params  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), repr(self)))
