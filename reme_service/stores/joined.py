"""A store capability: writes that run more work of the caller's inside their own transaction.

A backend whose writes are database transactions (pgvector) can take work to run on the write's connection before
it commits (`JoinsTransactions.joined`): what that work writes is committed with the memories, and a failure of
either rolls both back. The audited seam (`storage/audit.py`) uses it to write the memories' history in the
transaction of the memories it records, when the history lives in the store's database (`same_database`).
Backends without it (every other store) are written as before, and their history afterwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from reme_service.stores.base import VectorStore

#: work run on the store's connection (for pgvector a psycopg `AsyncConnection`) inside a write's transaction,
#: after the write's own statements; raising rolls the whole transaction back
TransactionWork = Callable[[Any], Awaitable[None]]


@runtime_checkable
class JoinsTransactions(Protocol):
    def in_database(self, dsn: str, conn_kwargs: Mapping[str, Any]) -> bool:
        """Whether libpq's `dsn` (with the separate parameters `conn_kwargs`) names this store's database."""

    def joined(self, then: TransactionWork) -> VectorStore:
        """A view of this store (sharing everything with it) whose writes run `then` in their transaction: once per
        write that changes something (a drop of an unknown workspace does not run it)."""


def same_database(a: tuple[str, Mapping[str, Any]], b: tuple[str, Mapping[str, Any]]) -> bool:
    """Whether two connection targets (libpq DSN, separate parameters) name one database as one user: the same host,
    port, database and user once parsed (an unparsable one names none). Spelled differently (`localhost` against
    `127.0.0.1`) they count as two: the caller then keeps two transactions, never wrongly joins them."""
    from psycopg import conninfo

    def identity(target: tuple[str, Mapping[str, Any]]) -> tuple[Any, ...] | None:
        try:
            info = conninfo.conninfo_to_dict(target[0], **target[1])
        except Exception:  # noqa: BLE001  (a DSN libpq cannot parse names nothing)
            return None
        return tuple(str(info.get(k, "")) for k in ("host", "port", "dbname", "user"))

    first = identity(a)
    return first is not None and first == identity(b)
