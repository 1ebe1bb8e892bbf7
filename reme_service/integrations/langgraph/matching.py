"""What `ReMeStore` decides on the client side: which values a search `filter` keeps, which namespaces a
`list_namespaces` condition keeps, and how deep namespaces are cut (BaseStore's documented semantics)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.store.base import MatchCondition

_MISSING = object()


def _at(value: Mapping[str, Any], path: str) -> Any:
    """`value[path]`, or the nested value a dotted path names (`"a.b"`: `value["a"]["b"]`); `_MISSING` if absent."""
    if path in value:
        return value[path]
    current: Any = value
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return _MISSING
        current = current[part]
    return current


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _compare(operator: str, actual: Any, expected: Any) -> bool:
    if operator == "$eq":
        return bool(actual == expected)
    if operator == "$ne":
        return bool(actual != expected)
    left, right = _number(actual), _number(expected)
    if left is None or right is None:
        return False
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    if operator == "$lte":
        return left <= right
    raise ValueError(f"unsupported filter operator {operator!r}: use $eq, $ne, $gt, $gte, $lt or $lte")


def _holds(actual: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping):
        if any(str(key).startswith("$") for key in expected):
            return all(_compare(op, actual, operand) for op, operand in expected.items())
        return isinstance(actual, Mapping) and all(_holds(actual.get(k, _MISSING), v) for k, v in expected.items())
    return bool(actual == expected)


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes `filter`: every key (dotted for nested fields) equal to its value, or
    satisfying each of its `$eq`/`$ne`/`$gt`/`$gte`/`$lt`/`$lte` operators (numbers compared as numbers)."""
    return not filter or all(_holds(_at(value, key), expected) for key, expected in filter.items())


def _fits(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want in ("*", have) for have, want in zip(part, path, strict=True))


def select_namespaces(
    namespaces: Iterable[tuple[str, ...]],
    conditions: Iterable[MatchCondition] | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> list[tuple[str, ...]]:
    """The namespaces matching every condition (prefix / suffix, `*` matching any one label), cut to `max_depth`
    labels and deduplicated, sorted, then `offset` skipped and at most `limit` kept."""
    wanted = list(conditions or ())
    kept = {ns[:max_depth] if max_depth is not None else ns for ns in namespaces if all(_fits(c, ns) for c in wanted)}
    return sorted(kept)[offset : offset + limit]


def has_prefix(namespace: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    return namespace[: len(prefix)] == tuple(prefix)
