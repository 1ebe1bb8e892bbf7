"""What the server-side backends (Chroma, Elasticsearch) share to filter natively: typed metadata leaves and a plan.

Neither backend can hold or query arbitrary nested JSON with our filter semantics, so each node is stored twice
over: its metadata verbatim (as JSON, for a lossless read-back) and its *scalar leaves*, one per path to a string,
number, boolean or null inside nested objects (`scalar_leaves`). A filter condition on `metadata.a.b` becomes a
condition on the leaf `a.b` of the matching kind: `s` (string), `n` (number, as a float), `b` (boolean), `z` (null).
Lists are not leaves (our grammar never lets a list equal a scalar), and neither is anything below a key that
contains a dot (a dotted filter path can never address it).

`plan_filter` splits a filter into what every node answers the same way (a condition on `workspace_id`, on the
`metadata` object itself, or below `content` / `unique_id`) — decided here once — and the conditions a backend
must translate. Translations say whether they are *exact*; when one is not, the store narrows with what it could
translate and applies the full predicate (`FilterPlan.predicate`) itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Literal

from reme_service.errors import PayloadTooLargeError
from reme_service.stores.filters import Condition, NodePredicate, compile_filter, parse_filter

LeafKind = Literal["s", "n", "b", "z"]

# Floats hold every integer up to 2**53 exactly; numbers beyond it compare approximately in a backend.
EXACT_INT_LIMIT = 2**53


def leaf_kind(value: Any) -> LeafKind | None:
    """The leaf kind of a scalar value, or None for values that are not leaves (lists, dicts, non-finite)."""
    if value is None:
        return "z"
    if isinstance(value, bool):
        return "b"
    if isinstance(value, str):
        return "s"
    if isinstance(value, int):
        return "n" if abs(value) < 1e300 else None
    if isinstance(value, float):
        return "n" if math.isfinite(value) else None
    return None


def leaf_value(kind: LeafKind, value: Any) -> Any:
    """The value as a backend stores it for `kind` (numbers as floats, null as True)."""
    if kind == "n":
        return float(value)
    if kind == "z":
        return True
    return value


def is_exact_number(value: Any) -> bool:
    """Whether a float keeps this number's identity (so equality and order survive the conversion)."""
    return not isinstance(value, int) or abs(value) <= EXACT_INT_LIMIT


#: the scalar leaves of one memory's metadata a Chroma record or an Elasticsearch document may index (each leaf a key
#: of the record, or a nested document). A Chroma record of ~5,500 keys (the leaves, plus as many stale ones set to
#: None by an update) fails Chroma's compaction, and every later write to that collection then fails too ("Failed
#: to apply logs to the metadata segment"): one memory would lock its workspace for good. Elasticsearch refuses a
#: document of more than 10,000 nested objects (`index.mapping.nested_objects.limit`).
MAX_RECORD_LEAVES = 2_000


def check_leaf_counts(backend: str, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
    """413 for the first memory whose metadata has more than `MAX_RECORD_LEAVES` scalar leaves, before anything of
    the write reaches the `backend`."""
    for index, (unique_id, metadata) in enumerate(zip(ids, metadatas, strict=True)):
        count = sum(1 for _ in scalar_leaves(metadata))
        if count > MAX_RECORD_LEAVES:
            raise PayloadTooLargeError(
                f"memory {index} of the write (id {unique_id!r}) has {count} values in its metadata; the {backend} "
                f"backend indexes at most {MAX_RECORD_LEAVES} per memory. Nothing was written",
                details={"index": index, "memory_id": unique_id, "values": count, "limit": MAX_RECORD_LEAVES},
            )


def scalar_leaves(metadata: Mapping[str, Any]) -> Iterator[tuple[str, LeafKind, Any]]:
    """`(dotted path, kind, stored value)` for every scalar leaf of `metadata`, depth first."""
    stack: list[tuple[str, Mapping[str, Any]]] = [("", metadata)]
    while stack:
        base, mapping = stack.pop()
        for key, value in mapping.items():
            if not isinstance(key, str) or not key or "." in key:
                continue
            path = f"{base}.{key}" if base else key
            if isinstance(value, Mapping):
                stack.append((path, value))
                continue
            kind = leaf_kind(value)
            if kind is not None:
                yield path, kind, leaf_value(kind, value)


def condition_spec(condition: Condition) -> dict[str, Any]:
    """The filter dict holding just this condition."""
    operand = list(condition.operand) if isinstance(condition.operand, tuple) else condition.operand
    return {condition.key: {condition.op: operand}}


def _static_outcome(condition: Condition, workspace_id: str) -> bool | None:
    """True/False when every node of the workspace answers the condition alike, else None."""
    root, rest = condition.path[0], condition.path[1:]
    fixed = (root == "workspace_id" and not rest) or (root == "metadata" and not rest) or (root != "metadata" and rest)
    if not fixed:
        return None
    stub = SimpleNamespace(unique_id="", workspace_id=workspace_id, content="", metadata={})
    predicate = compile_filter(condition_spec(condition))
    return predicate is None or bool(predicate(stub))


@dataclass(frozen=True, slots=True)
class FilterPlan:
    """A parsed filter for one workspace: `impossible` (matches nothing), the conditions left to translate, and the
    predicate every returned node must satisfy (None: no filter)."""

    conditions: tuple[Condition, ...]
    impossible: bool
    predicate: NodePredicate | None

    @property
    def empty(self) -> bool:
        return not self.conditions and not self.impossible


def plan_filter(filter: Mapping[str, Any] | None, workspace_id: str) -> FilterPlan:
    """Validate `filter` (InvalidRequestError when it is outside the grammar) and plan it for `workspace_id`."""
    conditions = parse_filter(filter)
    predicate = compile_filter(filter) if conditions else None
    left: list[Condition] = []
    impossible = False
    for condition in conditions:
        outcome = _static_outcome(condition, workspace_id)
        if outcome is None:
            left.append(condition)
        elif outcome is False:
            impossible = True
    return FilterPlan(tuple(left), impossible, predicate)


def metadata_path(condition: Condition) -> str | None:
    """The leaf path of a condition on `metadata.<path>`, else None."""
    if condition.path[0] == "metadata" and len(condition.path) > 1:
        return ".".join(condition.path[1:])
    return None


def group_by_kind(values: tuple[Any, ...]) -> dict[LeafKind, list[Any]]:
    """Membership operands grouped by leaf kind, as stored values (numbers as floats)."""
    groups: dict[LeafKind, list[Any]] = {}
    for value in values:
        kind = leaf_kind(value)
        if kind is not None:
            groups.setdefault(kind, []).append(leaf_value(kind, value))
    return groups
