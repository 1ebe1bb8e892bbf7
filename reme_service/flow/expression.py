"""Parse a flow expression such as `A(k=1) >> (B() | C())` into an op tree — with an AST whitelist, never eval.

Accepted: calls of registered op names with keyword arguments whose values are Python literals, bare op
names (same as a call without arguments), `>>`, `|` and parentheses. Anything else is a `FlowSyntaxError`
that names the column.
"""

from __future__ import annotations

import ast

from pydantic import ValidationError

from reme_service.errors import FlowSyntaxError, UnknownNameError, describe_validation_errors
from reme_service.flow.op import AnyOp, Node
from reme_service.flow.registry import Registry


def parse_flow(text: str, registry: Registry[type[AnyOp]], *, flow_name: str = "<flow>") -> Node:
    source = " ".join(text.strip().splitlines())
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        col = exc.offset or 1
        raise FlowSyntaxError(f"flow '{flow_name}': syntax error at column {col}: {exc.msg}") from None
    return _build(tree.body, registry, flow_name)


def _fail(flow_name: str, node: ast.AST, message: str) -> FlowSyntaxError:
    col = getattr(node, "col_offset", 0) + 1
    return FlowSyntaxError(f"flow '{flow_name}', column {col}: {message}")


def _build(node: ast.expr, registry: Registry[type[AnyOp]], flow_name: str) -> Node:
    match node:
        case ast.BinOp(left=left, op=ast.RShift(), right=right):
            return _build(left, registry, flow_name) >> _build(right, registry, flow_name)
        case ast.BinOp(left=left, op=ast.BitOr(), right=right):
            return _build(left, registry, flow_name) | _build(right, registry, flow_name)
        case ast.Name(id=name):
            return _make_op(node, name, {}, registry, flow_name)
        case ast.Call(func=ast.Name(id=name), args=[], keywords=keywords):
            params = {}
            for kw in keywords:
                if kw.arg is None:
                    raise _fail(flow_name, kw.value, "'**' arguments are not allowed")
                try:
                    params[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    raise _fail(flow_name, kw.value, f"the value of '{kw.arg}' must be a literal") from None
            return _make_op(node, name, params, registry, flow_name)
        case ast.Call(args=[first, *_]):
            raise _fail(flow_name, first, "op parameters must be given by keyword")
        case _:
            raise _fail(flow_name, node, f"unsupported syntax ({type(node).__name__}); use Op(k=v), >>, | and ()")


def _make_op(
    node: ast.AST, name: str, params: dict[str, object], registry: Registry[type[AnyOp]], flow_name: str
) -> AnyOp:
    try:
        cls = registry.get(name)
    except UnknownNameError as exc:
        raise _fail(flow_name, node, str(exc)) from None
    try:
        return cls(**params)
    except ValidationError as exc:
        problems = describe_validation_errors(exc, no_loc=name)
        valid = ", ".join(cls.Params.model_fields)
        raise _fail(flow_name, node, f"bad parameters for {name}: {problems} (valid: {valid})") from None
