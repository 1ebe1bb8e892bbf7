"""The connection type the pgvector store's modules share: psycopg's async connection returning tuple rows."""

from __future__ import annotations

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

Conn = AsyncConnection[TupleRow]
