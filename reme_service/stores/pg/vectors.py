"""Vectors sent to PostgreSQL in pgvector's binary format.

A batch of rows goes to the server as one `vector[]` parameter in PostgreSQL's binary array format, made by numpy
in one pass: text would be ~4,700 bytes a 384-d row (float32 printed to round-trip) that the server then parses, where
binary is 1,544, copied as is. `VectorRows` wraps the n x dim matrix; `register_vector_rows` teaches a connection to
dump it, given the oids of `vector` and `vector[]` in that database (`vector_oids`, read once per store).

pgvector's binary `vector`: int16 dimension, int16 unused (0), then the float4 values, all big-endian.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types import TypeInfo

from reme_service.stores.pg.conn import Conn


@dataclass(frozen=True, slots=True)
class VectorOids:
    element: int
    array: int


@dataclass(frozen=True, slots=True)
class VectorRows:
    """The rows of `matrix` (n x dim float32) as one `vector[]` value."""

    matrix: NDArray[np.float32]


def encode_rows(matrix: NDArray[np.float32], element_oid: int) -> bytes:
    """PostgreSQL's binary one-dimensional array of the rows as pgvector `vector`s (module docstring)."""
    rows, dim = matrix.shape
    if not rows:
        return struct.pack(">iii", 0, 0, element_oid)  # an empty array has no dimensions
    # each element: int32 length, then the vector (int16 dim, int16 0, float4 x dim): dim + 2 big-endian words
    words = np.empty((rows, dim + 2), dtype=">f4")
    words[:, 2:] = matrix
    ints = words.view(">i4")
    ints[:, 0] = 4 + 4 * dim
    ints[:, 1] = dim << 16
    header = struct.pack(">iiiii", 1, 0, element_oid, rows, 1)  # ndim, has nulls, element type, length, lower bound
    return header + words.tobytes()


async def vector_oids(conn: Conn) -> VectorOids:
    info = await TypeInfo.fetch(conn, "vector")
    if info is None:
        raise LookupError("the vector type is missing: is the pgvector extension installed in this database?")
    return VectorOids(info.oid, info.array_oid)


def register_vector_rows(conn: Conn, oids: VectorOids) -> None:
    """Let `conn` send `VectorRows` parameters (binary, as `vector[]`)."""

    class _RowsDumper(Dumper):
        format = Format.BINARY
        oid = oids.array

        def dump(self, obj: VectorRows) -> bytes:
            return encode_rows(obj.matrix, oids.element)

    conn.adapters.register_dumper(VectorRows, _RowsDumper)
