"""Chroma records for our nodes, and our filter grammar as a Chroma `where` clause.

A node's Chroma metadata holds reserved keys and its typed scalar leaves (see `stores/remote_filter.py`):

* `_json`: the node's metadata as JSON (the lossless copy read back; nested objects and `tool_call_results` too);
* `_uid`: the node id (Chroma's `where` cannot reach record ids); `_seq`: its listing position;
* `ms.<path>`, `mn.<path>`, `mb.<path>`, `mz.<path>`: one key per leaf, by kind (string, number as float, boolean,
  null as True), so each key holds one type and a condition never meets a value of another type.

Chroma's operators fit the grammar closely: `$eq` on a number matches ints and floats alike, `$ne` and `$nin` match
records that lack the key (as the grammar's `ne`/`nin` hold for a missing path). What does not translate —
conditions on `content`, string ranges (Chroma compares numbers only), numbers beyond 2**53 — is left out of
the clause and reported as inexact, so the store applies the full predicate itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from reme_service.stores.filters import Condition
from reme_service.stores.remote_filter import (
    group_by_kind,
    is_exact_number,
    leaf_kind,
    leaf_value,
    metadata_path,
    scalar_leaves,
)

JSON_KEY = "_json"
UID_KEY = "_uid"
SEQ_KEY = "_seq"
RESERVED_KEYS = frozenset({JSON_KEY, UID_KEY, SEQ_KEY})
LEAF_PREFIXES = ("ms.", "mn.", "mb.", "mz.")

_RANGE = {"gt": "$gt", "gte": "$gte", "lt": "$lt", "lte": "$lte"}
_LOOSE_RANGE = {"gt": "$gte", "gte": "$gte", "lt": "$lte", "lte": "$lte"}


class _Nothing:
    """A clause no record satisfies."""

    __slots__ = ()


NOTHING = _Nothing()
Clause = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChromaWhere:
    """The translated clause (None: no condition), whether it is exact, and whether nothing can match."""

    where: Clause | None
    exact: bool
    impossible: bool = False


def leaf_key(kind: str, path: str) -> str:
    return f"m{kind}.{path}"


def record_metadata(unique_id: str, seq: int, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The Chroma metadata of a node."""
    record: dict[str, Any] = {JSON_KEY: orjson.dumps(metadata).decode(), UID_KEY: unique_id, SEQ_KEY: seq}
    for path, kind, value in scalar_leaves(metadata):
        record[leaf_key(kind, path)] = value
    return record


def stale_keys(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, None]:
    """Keys of an existing record that the new one lacks, set to None: Chroma merges metadata on upsert, and a
    None value removes a key."""
    if not old:
        return {}
    return {key: None for key in old if key not in new}


def node_metadata(record: Mapping[str, Any] | None) -> dict[str, Any]:
    """A node's metadata from its Chroma metadata (records written by others: their keys as they are)."""
    if not record:
        return {}
    raw = record.get(JSON_KEY)
    if isinstance(raw, str):
        value = orjson.loads(raw)
        if isinstance(value, dict):
            return value
    return {key: value for key, value in record.items() if key not in RESERVED_KEYS}


def _all(clauses: Sequence[Clause]) -> Clause | None:
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": list(clauses)}


def _any(clauses: Sequence[Clause]) -> Clause:
    return clauses[0] if len(clauses) == 1 else {"$or": list(clauses)}


def _uid_clause(op: str, operand: Any) -> tuple[Clause | _Nothing | None, bool]:
    if op in ("eq", "ne"):
        if not isinstance(operand, str):
            return (NOTHING if op == "eq" else None), True
        return {UID_KEY: {f"${op}": operand}}, True
    if op in ("in", "nin"):
        strings = [item for item in operand if isinstance(item, str)]
        if not strings:
            return (NOTHING if op == "in" else None), True
        return {UID_KEY: {f"${op}": strings}}, True
    # a range: ids are strings, which never compare with numbers; Chroma has no string ranges
    return (None, False) if isinstance(operand, str) else (NOTHING, True)


def _membership(path: str, values: Iterable[Any], negate: bool) -> tuple[Clause | _Nothing | None, bool]:
    values = list(values)
    exact = all(is_exact_number(v) and leaf_kind(v) is not None for v in values)
    if negate:  # dropping an item from a `nin` only widens the match
        values = [v for v in values if is_exact_number(v)]
    elif not exact:
        return None, False  # a narrowed `in` could lose matches
    groups = group_by_kind(tuple(values))
    if not groups:
        return (None if negate else NOTHING), exact
    clauses: list[Clause] = []
    for kind, items in groups.items():
        key = leaf_key(kind, path)
        if kind == "z":
            clauses.append({key: {"$ne" if negate else "$eq": True}})
        else:
            clauses.append({key: {"$nin" if negate else "$in": items}})
    return (_all(clauses) if negate else _any(clauses)), exact


def _leaf_clause(path: str, op: str, operand: Any) -> tuple[Clause | _Nothing | None, bool]:
    if op in ("in", "nin"):
        return _membership(path, operand, negate=op == "nin")
    if op in ("eq", "ne"):
        kind = leaf_kind(operand)
        if kind is None or not is_exact_number(operand):
            return None, False
        return {leaf_key(kind, path): {f"${op}": leaf_value(kind, operand)}}, True
    if isinstance(operand, str):
        return None, False
    if is_exact_number(operand):
        return {leaf_key("n", path): {_RANGE[op]: float(operand)}}, True
    return {leaf_key("n", path): {_LOOSE_RANGE[op]: float(operand)}}, False


def _clause(condition: Condition) -> tuple[Clause | _Nothing | None, bool]:
    if condition.path == ("unique_id",):
        return _uid_clause(condition.op, condition.operand)
    path = metadata_path(condition)
    if path is None:  # `content`: Chroma matches documents by substring only
        return None, False
    return _leaf_clause(path, condition.op, condition.operand)


def chroma_where(conditions: Iterable[Condition]) -> ChromaWhere:
    """Translate planned conditions (see `plan_filter`) into one `where` clause."""
    clauses: list[Clause] = []
    exact = True
    for condition in conditions:
        clause, ok = _clause(condition)
        exact = exact and ok
        if isinstance(clause, _Nothing):
            return ChromaWhere(None, True, impossible=True)
        if clause is not None:
            clauses.append(clause)
    return ChromaWhere(_all(clauses), exact)
