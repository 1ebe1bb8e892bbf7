"""Writes ONNX models (protobuf wire format) for onnxruntime, without the `onnx` package.

The local embedder builds its graph in memory at load time from the weights it reads (`bert_graph.py`); all it
needs of ONNX is to serialise a `ModelProto`, so this module writes the few messages and fields involved
(model, graph, node, attribute, tensor, value info, opset id) by their field numbers in onnx/onnx.proto3.
onnxruntime checks what it parses; a malformed model fails at `InferenceSession` with its message.

A message is built as a list of chunks and joined once, in `model`: the weights' bytes are copied into the model
a single time (a model of the MiniLM layers is 42 MB).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

# TensorProto.DataType values
FLOAT = 1
INT64 = 7
_DATA_TYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.int64): INT64}

# AttributeProto.AttributeType values
_ATTR_FLOAT, _ATTR_INT, _ATTR_STRING, _ATTR_INTS = 1, 2, 3, 7

_IR_VERSION = 9  # ONNX 1.15+: onnxruntime 1.16 and later read it

Chunks: TypeAlias = list[bytes | memoryview]  # a serialised message, in pieces


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 values are written as their two's complement (ten bytes)
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _int(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(value)


def _bytes(field: int, value: bytes) -> bytes:
    return _key(field, 2) + _varint(len(value)) + value


def _str(field: int, value: str) -> bytes:
    return _bytes(field, value.encode("utf-8"))


def _message(field: int, chunks: Chunks) -> Chunks:
    """An embedded message (or bytes field) given as chunks, without joining them."""
    return [_key(field, 2), _varint(sum(len(chunk) for chunk in chunks)), *chunks]


def _float(field: int, value: float) -> bytes:
    return _key(field, 5) + struct.pack("<f", value)


def _attribute(name: str, value: float | int | str | Sequence[int]) -> bytes:
    if isinstance(value, int):  # bool is an int
        body = _int(3, int(value)) + _int(20, _ATTR_INT)
    elif isinstance(value, float):
        body = _float(2, value) + _int(20, _ATTR_FLOAT)
    elif isinstance(value, str):
        body = _str(4, value) + _int(20, _ATTR_STRING)
    else:
        body = b"".join(_int(8, int(v)) for v in value) + _int(20, _ATTR_INTS)
    return _str(1, name) + body


def node(
    op_type: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    *,
    domain: str = "",
    **attributes: float | int | str | Sequence[int],
) -> bytes:
    """A serialised NodeProto."""
    parts = [_str(1, name) for name in inputs]
    parts += [_str(2, name) for name in outputs]
    parts.append(_str(3, outputs[0]))  # node name: its first output, unique in a graph
    parts.append(_str(4, op_type))
    parts += [_bytes(5, _attribute(name, value)) for name, value in attributes.items()]
    if domain:
        parts.append(_str(7, domain))
    return b"".join(parts)


def tensor(name: str, array: NDArray[np.float32] | NDArray[np.int64]) -> Chunks:
    """A TensorProto holding `array` (float32 or int64) as little-endian raw data, which it refers to: the array
    must not change until the model is joined."""
    data_type = _DATA_TYPES.get(array.dtype)
    if data_type is None:
        raise ValueError(f"no ONNX tensor type for {array.dtype}")
    raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    head = b"".join([*(_int(1, int(d)) for d in array.shape), _int(2, data_type), _str(8, name)])
    return [head, *_message(9, [raw.data.cast("B")])]


def value_info(name: str, elem_type: int, dims: Iterable[int | str]) -> bytes:
    """A serialised ValueInfoProto of a tensor: each dimension a size or a symbolic name."""
    shape = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _str(2, d)) for d in dims)
    tensor_type = _int(1, elem_type) + _bytes(2, shape)
    return _str(1, name) + _bytes(2, _bytes(1, tensor_type))


def model(
    *,
    nodes: Sequence[bytes],
    initializers: Sequence[Chunks],
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    opsets: dict[str, int],
    name: str = "graph",
) -> bytes:
    """A serialised ModelProto of one graph; `opsets` maps each operator domain ("" for ONNX) to its version."""
    graph: Chunks = [_bytes(1, n) for n in nodes]
    graph.append(_str(2, name))
    for initializer in initializers:
        graph += _message(5, initializer)
    graph += [_bytes(11, i) for i in inputs]
    graph += [_bytes(12, o) for o in outputs]
    head: Chunks = [_int(1, _IR_VERSION), _str(2, "reme-service")]
    head += [_bytes(8, _str(1, domain) + _int(2, version)) for domain, version in opsets.items()]
    return b"".join([*head, *_message(7, graph)])
