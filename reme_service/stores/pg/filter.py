"""Our filter grammar (`stores/filters.py`) as a PostgreSQL `WHERE` clause over the pgvector store's rows.

A row holds `id` (text), `content` (text) and `metadata` (jsonb, the node's metadata as written). A condition's
value is a jsonb expression that is SQL NULL when the path does not exist: `to_jsonb(id)`, `to_jsonb(content)`, or
`metadata #> <path>`; since `#>` also indexes arrays (`{tags,0}`), a path with a segment that could be an array
index requires its container to be an object, as the grammar looks keys up in objects only.

Semantics, condition by condition (every value a bound parameter, never part of the SQL text):

* `eq`: jsonb equality with the operand as jsonb (`x = $1::jsonb`): strings equal strings, numbers compare by
  value (`1 = 1.0`), booleans and null only themselves, a missing path (NULL) never; `ne` is its negation that
  holds for a missing path too (`IS NOT TRUE`).
* `in` / `nin`: `x = ANY($1::jsonb[])`, and its negation.
* ranges: a number operand compares with numbers only (`CASE WHEN jsonb_typeof(x) = 'number' THEN x::numeric > $1
  ELSE false`), a string operand with strings only, by code point (UTF-8 bytes under the "C" collation).

Numbers travel as their shortest decimal text and compare as `numeric`: exact for every operand up to 2**53 in
magnitude. Conditions with a larger number, or with a string PostgreSQL cannot hold (NUL, lone surrogates), are
left out of the clause and the translation is marked inexact (the store then applies the full predicate itself);
an equality with such a string can never hold, since no stored value contains one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from psycopg import sql

from reme_service.stores.filters import Condition
from reme_service.stores.remote_filter import EXACT_INT_LIMIT

_MAYBE_INDEX = re.compile(r"\d")  # a segment PostgreSQL might read as an array index ("0", " 1", "+2", "-1")
TRUE = sql.SQL("TRUE")


@dataclass(frozen=True, slots=True)
class PgWhere:
    """The translated clause (None: no condition), its parameters, whether it is exact, whether nothing matches."""

    where: sql.Composable | None
    params: dict[str, Any] = field(default_factory=dict)
    exact: bool = True
    impossible: bool = False


def storable(text: str) -> bool:
    """Whether PostgreSQL can hold this string (no NUL, valid UTF-8: no lone surrogates)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _number_ok(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) <= EXACT_INT_LIMIT
    if isinstance(value, float):
        return math.isfinite(value) and abs(value) <= EXACT_INT_LIMIT
    return True


class _Builder:
    def __init__(self) -> None:
        self.params: dict[str, Any] = {}

    def param(self, value: Any, cast: str) -> sql.Composable:
        name = f"f{len(self.params)}"
        self.params[name] = value
        return sql.SQL("{}::{}").format(sql.Placeholder(name), sql.SQL(cast))  # cast: one of our fixed type names

    def value(self, path: tuple[str, ...]) -> sql.Composable:
        root, rest = path[0], path[1:]
        if root in ("unique_id", "content"):
            return sql.SQL("to_jsonb({})").format(sql.Identifier("id" if root == "unique_id" else "content"))
        expr = sql.SQL("(metadata #> {})").format(self.param(list(rest), "text[]"))
        guards = [
            sql.SQL("jsonb_typeof(metadata #> {}) = 'object'").format(self.param(list(rest[:i]), "text[]"))
            for i in range(1, len(rest))
            if _MAYBE_INDEX.search(rest[i])
        ]
        if not guards:
            return expr
        return sql.SQL("(CASE WHEN {} THEN {} END)").format(sql.SQL(" AND ").join(guards), expr)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _clause(b: _Builder, condition: Condition) -> tuple[sql.Composable | None, bool, bool]:
    """(clause or None for "no constraint", exact, impossible)."""
    path, op, operand = condition.path, condition.op, condition.operand
    if not all(storable(part) for part in path):  # no stored key holds such a character: the path is missing
        return (None, True, False) if op in ("ne", "nin") else (None, True, True)
    if op in ("eq", "ne"):
        if isinstance(operand, str) and not storable(operand):
            return (None, True, op == "eq")
        if not _number_ok(operand):
            return None, False, False
        if path == ("unique_id",) and isinstance(operand, str):
            fast = sql.SQL("id {} {}").format(sql.SQL("=" if op == "eq" else "<>"), b.param(operand, "text"))
            return fast, True, False
        test = sql.SQL("{} = {}").format(b.value(path), b.param(_json(operand), "jsonb"))
        return (test if op == "eq" else sql.SQL("({}) IS NOT TRUE").format(test)), True, False
    if op in ("in", "nin"):
        items = [item for item in operand if not (isinstance(item, str) and not storable(item))]
        exact = all(_number_ok(item) for item in items)
        if not exact:
            return None, False, False
        if not items:
            return (None, True, False) if op == "nin" else (None, True, True)
        if path == ("unique_id",) and all(isinstance(item, str) for item in items):
            test = sql.SQL("id = ANY({})").format(b.param(items, "text[]"))
        else:
            test = sql.SQL("{} = ANY({})").format(b.value(path), b.param([_json(item) for item in items], "jsonb[]"))
        return (test if op == "in" else sql.SQL("({}) IS NOT TRUE").format(test)), True, False
    # a range
    if isinstance(operand, str):
        if not storable(operand):
            return None, False, False
        value = b.value(path)
        test = sql.SQL(
            "CASE WHEN jsonb_typeof({v}) = 'string' THEN ({v} #>> '{{}}') COLLATE \"C\" {op} {p} COLLATE \"C\" "
            "ELSE FALSE END"
        ).format(v=value, op=sql.SQL(_RANGE_SQL[op]), p=b.param(operand, "text"))
        return test, True, False
    if not _number_ok(operand):
        return None, False, False
    value = b.value(path)
    test = sql.SQL("CASE WHEN jsonb_typeof({v}) = 'number' THEN ({v})::numeric {op} {p} ELSE FALSE END").format(
        v=value, op=sql.SQL(_RANGE_SQL[op]), p=b.param(_json(operand), "numeric")
    )
    return test, True, False


_RANGE_SQL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def pg_where(conditions: Iterable[Condition]) -> PgWhere:
    """Translate planned conditions (see `remote_filter.plan_filter`) into one `WHERE` clause."""
    builder = _Builder()
    clauses: list[sql.Composable] = []
    exact = True
    for condition in conditions:
        clause, ok, impossible = _clause(builder, condition)
        if impossible:
            return PgWhere(None, {}, True, impossible=True)
        exact = exact and ok
        if clause is not None:
            clauses.append(clause)
    if not clauses:
        return PgWhere(None, {}, exact)
    where = sql.SQL(" AND ").join(sql.SQL("({})").format(clause) for clause in clauses)
    return PgWhere(where, builder.params, exact)
