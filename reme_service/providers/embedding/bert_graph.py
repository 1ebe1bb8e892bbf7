"""The MiniLM (BERT) encoder layers as one ONNX graph, run by onnxruntime on the calling thread.

`EncoderGraph` turns the layers' weights into a model (`onnx_proto`) and opens it in an onnxruntime session.
The dense layers run on the real tokens of a batch packed together (padding never goes through them);
only attention works on the padded (batch, seq) grid. Inputs:

- `hidden`, (tokens, hidden) float32: the embedding layer's output for the real tokens, computed in numpy;
- `grid_index`, (batch, seq) int64: the packed row of each grid cell (any row for a padding cell);
- `token_index`, (tokens,) int64: the grid cell (batch·seq + position) of each packed row;
- `key_bias`, (batch, 1, 1, seq) float32: 0 for a real token, a large negative number for padding, added to every
  attention score of that key.

Output `states`, (tokens, hidden): the last layer's hidden states of the packed tokens.

Why onnxruntime rather than numpy's matmuls: the same float32 arithmetic took a 13-token query ~4 ms against
~8 ms (one core, best of 50). Most of the difference is the weights' layout: onnxruntime repacks each constant
weight matrix once, at load, into the layout its GEMM kernel reads (with that turned off it took 8.6 ms, as numpy
did), where OpenBLAS packs its operands again on every call; and each layer is one call instead of ~30 numpy
operations. Its int8 path (`DynamicQuantizeMatMul`, one scale per activation tensor) was 4x faster still but
moved the vectors to a cosine of 0.976 from the reference, below the 0.999 this embedder keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from reme_service.providers.embedding import onnx_proto as pb


@dataclass(frozen=True, slots=True)
class EncoderLayer:
    """One layer's weights, linear maps as (in, out): `y = x @ w + b`; the query map pre-scaled by 1/√head_dim."""

    qkv_w: NDArray[np.float32]  # (hidden, 3·hidden): query, key, value
    qkv_b: NDArray[np.float32]
    attn_out_w: NDArray[np.float32]
    attn_out_b: NDArray[np.float32]
    attn_ln_g: NDArray[np.float32]
    attn_ln_b: NDArray[np.float32]
    inter_w: NDArray[np.float32]
    inter_b: NDArray[np.float32]
    out_w: NDArray[np.float32]
    out_b: NDArray[np.float32]
    out_ln_g: NDArray[np.float32]
    out_ln_b: NDArray[np.float32]


def bert_encoder_model(layers: Sequence[EncoderLayer], *, num_heads: int, eps: float) -> bytes:
    """The serialised ONNX model of the encoder layers (see the module docstring for its inputs and output)."""
    hidden = int(layers[0].qkv_w.shape[0])
    head_dim = hidden // num_heads
    nodes: list[bytes] = []
    initializers: list[pb.Chunks] = []

    def constant(name: str, array: NDArray[Any]) -> str:
        initializers.append(pb.tensor(name, array))
        return name

    def dense(x: str, w: NDArray[np.float32], b: NDArray[np.float32], out: str) -> str:
        nodes.append(pb.node("MatMul", [x, constant(out + ".w", w)], [out + ".xw"]))
        nodes.append(pb.node("Add", [out + ".xw", constant(out + ".b", b)], [out]))
        return out

    def layer_norm(x: str, gamma: NDArray[np.float32], beta: NDArray[np.float32], out: str) -> str:
        inputs = [x, constant(out + ".g", gamma), constant(out + ".b", beta)]
        nodes.append(pb.node("LayerNormalization", inputs, [out], axis=-1, epsilon=eps))
        return out

    # (batch, seq, 3·hidden) → (batch, seq, 3, heads, head_dim); (batch, seq, heads, head_dim) → (batch·seq, hidden)
    split_heads = constant("split_heads", np.array([0, 0, 3, num_heads, head_dim], dtype=np.int64))
    join_heads = constant("join_heads", np.array([-1, hidden], dtype=np.int64))
    axis0 = constant("axis0", np.array([0], dtype=np.int64))
    x = "hidden"
    for index, layer in enumerate(layers):
        p = f"layer{index}."
        qkv = dense(x, layer.qkv_w, layer.qkv_b, p + "qkv")
        nodes.append(pb.node("Gather", [qkv, "grid_index"], [p + "qkv_grid"], axis=0))  # packed → (b, s, 3·hidden)
        nodes.append(pb.node("Reshape", [p + "qkv_grid", split_heads], [p + "qkv5"]))
        nodes.append(pb.node("Transpose", [p + "qkv5"], [p + "qkv_t"], perm=[2, 0, 3, 1, 4]))  # 3, b, h, s, d
        nodes.append(pb.node("Split", [p + "qkv_t"], [p + "q1", p + "k1", p + "v1"], axis=0, num_outputs=3))
        for name in ("q", "k", "v"):
            nodes.append(pb.node("Squeeze", [p + name + "1", axis0], [p + name]))
        nodes.append(pb.node("Transpose", [p + "k"], [p + "k_t"], perm=[0, 1, 3, 2]))
        nodes.append(pb.node("MatMul", [p + "q", p + "k_t"], [p + "scores"]))  # b, h, s, s
        nodes.append(pb.node("Add", [p + "scores", "key_bias"], [p + "biased"]))
        nodes.append(pb.node("Softmax", [p + "biased"], [p + "weights"], axis=-1))
        nodes.append(pb.node("MatMul", [p + "weights", p + "v"], [p + "context"]))  # b, h, s, d
        nodes.append(pb.node("Transpose", [p + "context"], [p + "context_t"], perm=[0, 2, 1, 3]))
        nodes.append(pb.node("Reshape", [p + "context_t", join_heads], [p + "context_grid"]))
        nodes.append(pb.node("Gather", [p + "context_grid", "token_index"], [p + "context2"], axis=0))  # → packed
        attended = dense(p + "context2", layer.attn_out_w, layer.attn_out_b, p + "attn_out")
        nodes.append(pb.node("Add", [attended, x], [p + "attn_res"]))
        mid = layer_norm(p + "attn_res", layer.attn_ln_g, layer.attn_ln_b, p + "attn_ln")
        inter = dense(mid, layer.inter_w, layer.inter_b, p + "inter")
        nodes.append(pb.node("Gelu", [inter], [p + "gelu"], approximate="none"))
        out = dense(p + "gelu", layer.out_w, layer.out_b, p + "out")
        nodes.append(pb.node("Add", [out, mid], [p + "out_res"]))
        x = layer_norm(p + "out_res", layer.out_ln_g, layer.out_ln_b, p + "out_ln")
    nodes.append(pb.node("Identity", [x], ["states"]))
    return pb.model(
        nodes=nodes,
        initializers=initializers,
        inputs=[
            pb.value_info("hidden", pb.FLOAT, ["tokens", hidden]),
            pb.value_info("grid_index", pb.INT64, ["batch", "seq"]),
            pb.value_info("token_index", pb.INT64, ["tokens"]),
            pb.value_info("key_bias", pb.FLOAT, ["batch", 1, 1, "seq"]),
        ],
        outputs=[pb.value_info("states", pb.FLOAT, ["tokens", hidden])],
        opsets={"": 20},
        name="minilm_encoder",
    )


class EncoderGraph:
    """The encoder layers in an onnxruntime session, and how a forward pass runs it.

    The session computes on the thread calling `run` (no thread pool of its own, so several threads may run it at
    once, each on its own core) and never spin-waits. Every run gives the memory of its intermediate tensors back
    at its end (onnxruntime's arena shrinkage): otherwise the arena keeps what the largest batch needed (+240 MiB
    after 32 texts of 256 tokens) for the life of the process; a single query's few hundred KB cost nothing to
    allocate again.
    """

    def __init__(self, layers: Sequence[EncoderLayer], *, num_heads: int, eps: float) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # errors only: no warnings about the optional graph rewrites on stderr
        session = ort.InferenceSession(
            bert_encoder_model(layers, num_heads=num_heads, eps=eps), options, providers=["CPUExecutionProvider"]
        )
        # onnxruntime's Python wrapper keeps the serialised model (42 MB of weights) only to rebuild the session
        # with other providers; the session has its own copy, so the bytes are let go
        if isinstance(getattr(session, "_model_bytes", None), bytes):
            session._model_bytes = None
        self._session = session
        self._run_options = ort.RunOptions()
        self._run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def run(
        self,
        hidden: NDArray[np.float32],
        grid_index: NDArray[np.int64],
        token_index: NDArray[np.int64],
        key_bias: NDArray[np.float32],
    ) -> NDArray[np.float32]:
        """The last layer's states of the packed tokens (see the module docstring for the inputs)."""
        feeds = {"hidden": hidden, "grid_index": grid_index, "token_index": token_index, "key_bias": key_bias}
        states: NDArray[np.float32] = self._session.run(["states"], feeds, self._run_options)[0]
        return states
