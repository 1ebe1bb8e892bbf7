"""Prove at start-up that a flow gives every op what it declares it reads.

Two kinds of mistake stop the start, each named by flow, op and field:

- an op reads a request field the flow's request model does not declare (ReMe silently dropped such fields: a
  flow whose schema forgot `top_k` answered 3 memories whatever the client asked), or declares it with a type
  that cannot hold what the op expects;
- an op reads a context key that no earlier op writes, or two branches of one `|` group write the same key.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel

from reme_service.errors import FlowDeclarationError
from reme_service.flow.context import Input
from reme_service.flow.op import AnyOp, Node, Op, Parallel, Sequential

_NUMBERS = {int, float}


def check_flow(flow_name: str, tree: Node, request_model: type[BaseModel]) -> None:
    """Raise `FlowDeclarationError` when `tree`'s ops read what `request_model` or earlier ops do not provide."""
    for op in tree.ops():
        for spec in op.inputs:
            _check_input(flow_name, op, spec, request_model)
        for spec in op.may_input:  # optional: checked only where the flow declares it (else the default is read)
            if spec.name in request_model.model_fields:
                _check_input(flow_name, op, spec, request_model)
    _check_keys(flow_name, tree, frozenset())


def _check_input(flow_name: str, op: AnyOp, spec: Input[Any], request_model: type[BaseModel]) -> None:
    declared = request_model.model_fields.get(spec.name)
    if declared is None:
        raise FlowDeclarationError(
            f"flow '{flow_name}': op {op.name} reads request field '{spec.name}', which the flow's input_schema "
            f"does not declare (declared: {', '.join(request_model.model_fields)})"
        )
    if not compatible(declared.annotation, spec.type):
        raise FlowDeclarationError(
            f"flow '{flow_name}': op {op.name} reads request field '{spec.name}' as {_name(spec.type)}, "
            f"but the flow declares it as {_name(declared.annotation)}"
        )


def _check_keys(flow_name: str, node: Node, available: frozenset[str]) -> frozenset[str]:
    """The keys available after `node`, given those available before it."""
    if isinstance(node, Sequential):
        for child in node.children:
            available = _check_keys(flow_name, child, available)
        return available
    if isinstance(node, Parallel):
        written: dict[str, str] = {}
        after = set(available)
        for child in node.children:
            produced = _check_keys(flow_name, child, available) - available
            for name in produced:
                if name in written:
                    raise FlowDeclarationError(
                        f"flow '{flow_name}': parallel branches {written[name]} and {_first_op(child)} "
                        f"both write context key '{name}'"
                    )
                written[name] = _first_op(child)
            after |= produced
        return frozenset(after)
    assert isinstance(node, Op)
    for key in node.reads:
        if key.name not in available:
            raise FlowDeclarationError(
                f"flow '{flow_name}': op {node.name} reads context key '{key.name}', which no earlier op writes"
            )
    return available | node.writable_keys


def _first_op(node: Node) -> str:
    return node.ops()[0].name


def _members(annotation: Any) -> list[Any]:
    """The plain types a value of `annotation` may have: unions are split (None dropped), `Annotated` unwrapped and
    a `Literal` replaced by the types of its values, recursively."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return [m for a in typing.get_args(annotation) if a is not type(None) for m in _members(a)]
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return list(dict.fromkeys(type(value) for value in typing.get_args(annotation)))
    return [annotation]


def _base(annotation: Any) -> Any:
    return typing.get_origin(annotation) or annotation


def compatible(declared: Any, expected: Any) -> bool:
    """Whether a value validated as `declared` can be read as `expected`: outer types match (containers by
    kind, items when both sides name them), an int may be read as a float, and `Any` on either side matches."""
    for have in _members(declared):
        for want in _members(expected):
            if _one_compatible(have, want):
                return True
    return False


def _one_compatible(have: Any, want: Any) -> bool:
    if have is Any or want is Any:
        return True
    have_base, want_base = _base(have), _base(want)
    if have_base is want_base or (want_base is float and have_base in _NUMBERS):
        have_args, want_args = typing.get_args(have), typing.get_args(want)
        if have_args and want_args and have_base in (list, tuple, set, frozenset):
            return compatible(have_args[0], want_args[0])
        return True
    return isinstance(have_base, type) and isinstance(want_base, type) and issubclass(have_base, want_base)


def _name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or repr(annotation).replace("typing.", "")
