"""The store filter grammar: parse a filter dict once, then evaluate it cheaply over many nodes.

A filter is a dict of conditions that must all hold. Each key is a dotted path into a node's dict form
`{"unique_id", "workspace_id", "content", "metadata": {...}}` (e.g. `metadata.memory_type`,
`metadata.metadata.freq`); each value is

* a scalar (str, int, float, bool, None): equality;
* a list: membership (the node's value equals one of the items);
* a dict of operators, all of which must hold: `eq`, `ne`, `gt`, `gte`, `lt`, `lte` (operand a scalar; the
  range operators take a number or a string), `in`, `nin` (operand a list).

A path must start with one of those four fields. A path that does not exist in the node (a missing key, or a
key looked up inside a non-object) matches nothing, except under `ne` and `nin`, which it satisfies.
Equality is JSON-like: booleans equal only booleans, numbers compare by value (`1 == 1.0`), other values by
type and value. Range operators compare numbers with numbers and strings with strings; other pairs do not
match. Anything outside this grammar raises `InvalidRequestError` naming the offending key.

`parse_filter` returns the conditions as data (what a backend with a native query language translates);
`compile_filter` (or `compile_conditions` over parsed conditions) returns a predicate over nodes (a
`VectorNode`, or any object with the same four attributes), or None when there is nothing to check.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from reme_service.errors import InvalidRequestError


class NodeLike(Protocol):
    """What a filter reads: the fields of a `VectorNode` other than its vector."""

    unique_id: str
    workspace_id: str
    content: str
    metadata: dict[str, Any]


NodePredicate = Callable[[NodeLike], bool]

OPERATORS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"})
ROOT_FIELDS = frozenset({"unique_id", "workspace_id", "content", "metadata"})
_RANGE_OPS: Mapping[str, Callable[[Any, Any], bool]] = MappingProxyType(
    {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}
)
_SCALARS = (str, int, float, bool, type(None))


class _Missing:
    """The value of a path that does not exist in a node."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


@dataclass(frozen=True, slots=True)
class Condition:
    """One parsed condition: `path` (split on dots), an operator of `OPERATORS`, and its operand."""

    path: tuple[str, ...]
    op: str
    operand: Any

    @property
    def key(self) -> str:
        return ".".join(self.path)


def _invalid(key: str, problem: str) -> InvalidRequestError:
    return InvalidRequestError(f"invalid filter on {key!r}: {problem}", details={"field": "filter", "key": key})


def _is_scalar(value: Any) -> bool:
    return isinstance(value, _SCALARS)


def _check_list(key: str, op: str, operand: Any) -> tuple[Any, ...]:
    if not isinstance(operand, list | tuple):
        raise _invalid(key, f"operator {op!r} takes a list, got {type(operand).__name__}")
    for item in operand:
        if not _is_scalar(item):
            raise _invalid(key, f"the items of {op!r} must be scalars, got {type(item).__name__}")
    return tuple(operand)


def _check_operand(key: str, op: str, operand: Any) -> Any:
    if op in ("in", "nin"):
        return _check_list(key, op, operand)
    if op in _RANGE_OPS:
        if isinstance(operand, bool) or not isinstance(operand, int | float | str):
            raise _invalid(key, f"operator {op!r} takes a number or a string, got {type(operand).__name__}")
        return operand
    if not _is_scalar(operand):
        raise _invalid(key, f"operator {op!r} takes a scalar, got {type(operand).__name__}")
    return operand


def _split_path(key: Any) -> tuple[str, ...]:
    if not isinstance(key, str) or not key:
        raise InvalidRequestError(
            f"invalid filter key {key!r}: keys are non-empty dotted paths", details={"field": "filter"}
        )
    path = tuple(key.split("."))
    if any(not part for part in path):
        raise _invalid(key, "empty path segment")
    if path[0] not in ROOT_FIELDS:
        raise _invalid(key, f"a path starts with one of {', '.join(sorted(ROOT_FIELDS))} (e.g. 'metadata.{key}')")
    return path


def parse_filter(filter: Mapping[str, Any] | None) -> list[Condition]:
    """Validate a filter and return its conditions (an empty list when there are none)."""
    if filter is None:
        return []
    if not isinstance(filter, Mapping):
        raise InvalidRequestError(
            f"a filter must be an object, got {type(filter).__name__}", details={"field": "filter"}
        )
    conditions: list[Condition] = []
    for key, spec in filter.items():
        path = _split_path(key)
        if isinstance(spec, Mapping):
            if not spec:
                raise _invalid(key, "empty operator object")
            for op, operand in spec.items():
                if op not in OPERATORS:
                    raise _invalid(key, f"unknown operator {op!r} (use one of {', '.join(sorted(OPERATORS))})")
                conditions.append(Condition(path, op, _check_operand(key, op, operand)))
        elif isinstance(spec, list | tuple):
            conditions.append(Condition(path, "in", _check_list(key, "membership", spec)))
        elif _is_scalar(spec):
            conditions.append(Condition(path, "eq", spec))
        else:
            raise _invalid(key, f"a condition is a scalar, a list or an operator object, got {type(spec).__name__}")
    return conditions


def _getter(path: tuple[str, ...]) -> Callable[[NodeLike], Any]:
    """A function returning the value at `path` in a node, or MISSING."""
    root, rest = path[0], path[1:]
    if root != "metadata":
        if rest:  # strings have no sub-keys
            return lambda node: MISSING
        return operator.attrgetter(root)
    if not rest:
        return operator.attrgetter("metadata")
    if len(rest) == 1:
        (only,) = rest
        return lambda node: node.metadata.get(only, MISSING)

    def get(node: NodeLike) -> Any:
        value: Any = node.metadata
        for part in rest:
            if not isinstance(value, dict):
                return MISSING
            value = value.get(part, MISSING)
            if value is MISSING:
                return MISSING
        return value

    return get


def _key(value: Any) -> Any:
    """A hashable equality key under which booleans and numbers never collide (True != 1)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("num", value)
    if isinstance(value, dict | list):
        return ("unhashable", id(value))  # a container never equals a scalar operand
    return (type(value).__name__, value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _eq_test(operand: Any) -> Callable[[Any], bool]:
    """Equality with `operand`; false for MISSING. Specialised by operand type: this runs once per node."""
    if operand is None or isinstance(operand, bool):
        return lambda value: value is operand
    if isinstance(operand, str):
        return lambda value: value == operand  # only a str equals a str (MISSING included)
    return lambda value: value == operand and _is_number(value)


def _in_test(operand: tuple[Any, ...]) -> Callable[[Any], bool]:
    """Membership in `operand`; false for MISSING."""
    if all(isinstance(item, str) for item in operand):
        strings = frozenset(operand)
        return lambda value: isinstance(value, str) and value in strings
    keys = frozenset(_key(item) for item in operand)
    return lambda value: value is not MISSING and _key(value) in keys


def _range_test(op: str, operand: Any) -> Callable[[Any], bool]:
    compare = _RANGE_OPS[op]
    if isinstance(operand, str):
        return lambda value: isinstance(value, str) and compare(value, operand)
    return lambda value: _is_number(value) and compare(value, operand)


def _value_test(condition: Condition) -> Callable[[Any], bool]:
    op, operand = condition.op, condition.operand
    if op in ("eq", "ne"):
        test = _eq_test(operand)
    elif op in ("in", "nin"):
        test = _in_test(operand)
    else:
        return _range_test(op, operand)
    if op in ("ne", "nin"):  # the negations hold for a missing path, where eq/in are false
        return lambda value: not test(value)
    return test


def _compile_condition(condition: Condition) -> NodePredicate:
    path, operand = condition.path, condition.operand
    if condition.op == "eq" and isinstance(operand, str) and len(path) == 2 and path[0] == "metadata":
        key = path[1]  # the hot case, `metadata.memory_type == "task"`, in one call
        return lambda node: node.metadata.get(key) == operand
    get = _getter(path)
    test = _value_test(condition)
    return lambda node: test(get(node))


def compile_filter(filter: Mapping[str, Any] | None) -> NodePredicate | None:
    """Parse `filter` once into a predicate over nodes; None when the filter is empty (everything matches)."""
    return compile_conditions(parse_filter(filter))


def compile_conditions(conditions: list[Condition]) -> NodePredicate | None:
    """A predicate for all of `conditions` (from `parse_filter`); None when there are none."""
    predicates = [_compile_condition(c) for c in conditions]
    if not predicates:
        return None
    if len(predicates) == 1:
        return predicates[0]
    if len(predicates) == 2:
        first, second = predicates
        return lambda node: first(node) and second(node)
    return lambda node: all(predicate(node) for predicate in predicates)


def matches(node: NodeLike, filter: Mapping[str, Any] | None) -> bool:
    """Whether one node satisfies `filter` (compile once with `compile_filter` when testing many)."""
    predicate = compile_filter(filter)
    return predicate is None or predicate(node)
