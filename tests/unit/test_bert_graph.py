"""The encoder graph written for onnxruntime computes what a plain numpy BERT layer stack computes.

A small random encoder (no model files needed): each text run alone through a direct numpy transcription of the
BERT layer, against the texts packed into one padded batch through the ONNX graph.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from reme_service.providers.embedding import onnx_proto
from reme_service.providers.embedding.bert_graph import EncoderGraph, EncoderLayer

HIDDEN, HEADS, INTERMEDIATE, EPS = 16, 4, 32, 1e-12


def _random_layer(rng: np.random.Generator) -> EncoderLayer:
    def w(*shape: int) -> NDArray[np.float32]:
        return rng.normal(0.0, 0.3, shape).astype(np.float32)

    return EncoderLayer(
        qkv_w=w(HIDDEN, 3 * HIDDEN),
        qkv_b=w(3 * HIDDEN),
        attn_out_w=w(HIDDEN, HIDDEN),
        attn_out_b=w(HIDDEN),
        attn_ln_g=1.0 + w(HIDDEN),
        attn_ln_b=w(HIDDEN),
        inter_w=w(HIDDEN, INTERMEDIATE),
        inter_b=w(INTERMEDIATE),
        out_w=w(INTERMEDIATE, HIDDEN),
        out_b=w(HIDDEN),
        out_ln_g=1.0 + w(HIDDEN),
        out_ln_b=w(HIDDEN),
    )


def _layer_norm(x: NDArray[np.float64], g: NDArray[np.float32], b: NDArray[np.float32]) -> NDArray[np.float64]:
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + EPS) * g + b


def _reference(layers: list[EncoderLayer], h: NDArray[np.float32]) -> NDArray[np.float64]:
    """One text (seq, hidden) through the layers, in float64, with no padding and no mask."""
    x = h.astype(np.float64)
    head_dim = HIDDEN // HEADS
    erf = np.vectorize(math.erf)
    for layer in layers:
        qkv = x @ layer.qkv_w + layer.qkv_b
        q, k, v = (part.reshape(-1, HEADS, head_dim).transpose(1, 0, 2) for part in np.split(qkv, 3, axis=1))
        scores = q @ k.transpose(0, 2, 1)  # the query map is taken as pre-scaled
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        context = (weights @ v).transpose(1, 0, 2).reshape(-1, HIDDEN)
        mid = _layer_norm(context @ layer.attn_out_w + layer.attn_out_b + x, layer.attn_ln_g, layer.attn_ln_b)
        inter = mid @ layer.inter_w + layer.inter_b
        inter = 0.5 * inter * (1.0 + erf(inter / math.sqrt(2.0)))
        x = _layer_norm(inter @ layer.out_w + layer.out_b + mid, layer.out_ln_g, layer.out_ln_b)
    return x


def test_packed_padded_batch_matches_each_text_alone() -> None:
    rng = np.random.default_rng(7)
    layers = [_random_layer(rng) for _ in range(2)]
    graph = EncoderGraph(layers, num_heads=HEADS, eps=EPS)
    lengths = [5, 2, 7]
    texts = [rng.normal(0.0, 1.0, (n, HIDDEN)).astype(np.float32) for n in lengths]
    batch, seq = len(lengths), max(lengths)
    mask = np.zeros((batch, seq), dtype=bool)
    for row, n in enumerate(lengths):
        mask[row, :n] = True
    real = np.flatnonzero(mask.reshape(-1))
    grid_index = np.zeros(batch * seq, dtype=np.int64)
    grid_index[real] = np.arange(len(real))
    key_bias = np.where(mask, np.float32(0.0), np.float32(-1e9)).astype(np.float32)

    states = graph.run(
        np.concatenate(texts),
        grid_index.reshape(batch, seq),
        real.astype(np.int64),
        key_bias.reshape(batch, 1, 1, seq),
    )

    assert states.shape == (sum(lengths), HIDDEN)
    expected = np.concatenate([_reference(layers, text) for text in texts])
    np.testing.assert_allclose(states, expected, rtol=0, atol=2e-4)


def _rss_mib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not Path("/proc/self/statm").is_file(), reason="reads the resident size from Linux's /proc")
def test_a_big_batch_gives_its_memory_back() -> None:
    # onnxruntime's arena would keep what the largest batch needed (here ~200 MiB of attention scores) for good
    rng = np.random.default_rng(3)
    graph = EncoderGraph([_random_layer(rng)], num_heads=HEADS, eps=EPS)

    def run(batch: int, seq: int) -> None:
        grid = np.arange(batch * seq, dtype=np.int64)
        hidden = rng.normal(0.0, 1.0, (batch * seq, HIDDEN)).astype(np.float32)
        graph.run(hidden, grid.reshape(batch, seq), grid, np.zeros((batch, 1, 1, seq), dtype=np.float32))

    run(1, 8)  # a small first run: the session's one-off allocations are not counted
    before = _rss_mib()
    run(16, 512)
    assert _rss_mib() - before < 40


def test_tensor_refuses_a_type_it_cannot_write() -> None:
    with pytest.raises(ValueError, match="no ONNX tensor type"):
        onnx_proto.tensor("x", np.zeros(3, dtype=np.float16))  # type: ignore[arg-type]
