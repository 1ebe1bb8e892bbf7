"""Summary overhead: the service's own cost per summarised trajectory, with a zero-latency LLM.

`summary_task_memory` (and `summary_task_memory_simple`) run through `ReMeApp.async_execute` — request
validation, the op tree, prompt rendering, reply parsing, dedup, the store write — with an in-process LLM
(`ScriptedLLM`) that answers each op instantly with a contract-following reply scripted for that op. So the time
measured is the framework's alone (the hash embedder's few microseconds included). The LLM and the embedder count their
calls, which gives LLM calls and embedding calls (and embedded texts) per trajectory.

    python cookbook/bench/summary_overhead.py
    python cookbook/bench/summary_overhead.py --batch-sizes 1 8 32 --requests 20 --store local

Each request carries `batch` trajectories (half successes, half failures; 10 messages each, with tool calls).
Each extraction reply holds 2 memories (the soft comparison 1), each distinct, so nothing is lost to dedup
and every memory is validated and stored. Target: <= 5 ms per trajectory.

ReMe 0.2's dedup embedded both texts of every compared pair: for n new memories and m stored ones that is up
to 2·n·(n-1)/2 in-batch embeddings (and, had its existing-memory comparison worked, 2·n·m more). Ours embeds
each new memory once (one batched call) and compares against stored vectors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from reme_service.app import ReMeApp
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.testing.scripted_llm import ScriptedLLM

VOCABULARY = (
    "invoice flight hotel profile password calendar report refund spreadsheet email contact playlist budget "
    "timezone shipment warehouse ticket subscription coupon review recipe garden backup database column schema "
    "deploy rollback migration cache latency token quota payment receipt address phone meeting agenda"
)
WORDS = VOCABULARY.split(" ")


class Experiences:
    """Extraction replies that follow the ops' contract: `count` distinct memories (dedup keeps them all)."""

    def __init__(self) -> None:
        self._counter = 0
        self._rng = random.Random(1)

    def reply(self, count: int, body: str = "experience") -> str:
        items = []
        for _ in range(count):
            self._counter += 1
            words = " ".join(f"w{self._rng.randrange(1_000_000)}" for _ in range(6))  # distinct: dedup keeps all
            items.append(
                {
                    "when_to_use": f"when {words}",
                    body: f"advice {self._counter}",
                    "tags": ["bench"],
                    "confidence": 0.8,
                    "step_type": "action",
                    "tools_used": ["search"],
                }
            )
        return f"```json\n{json.dumps(items)}\n```"


def instant_llm() -> ScriptedLLM:
    """Answers each task-memory op at once, scripted by the op that asks (not by the prompt's wording); an op
    without a script fails the run, naming itself. `len(llm.calls)` counts the calls."""
    made = Experiences()
    verdict = '```json\n{"is_valid": true, "score": 0.8, "feedback": "ok", "recommendations": ""}\n```'
    return (
        ScriptedLLM()
        .on("SuccessExtractionOp", lambda _: made.reply(2))
        .on("FailureExtractionOp", lambda _: made.reply(2))
        .on("ComparativeExtractionOp", lambda _: made.reply(1))
        .on("SimpleSummaryOp", lambda _: made.reply(2, body="memory"))
        .on("MemoryValidationOp", verdict)
    )


class CountingEmbedder(EmbeddingClient):
    """Delegates to another embedder and counts calls and texts."""

    def __init__(self, inner: EmbeddingClient) -> None:
        self.inner = inner
        self.backend = inner.backend
        self.model_name = inner.model_name
        self.calls = 0
        self.texts = 0

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += 1
        self.texts += len(texts)
        return await self.inner.embed(texts)


def make_trajectory(rng: random.Random, index: int, success: bool) -> dict[str, Any]:
    task = " ".join([*rng.sample(WORDS, 2), *(f"w{rng.randrange(1_000_000)}" for _ in range(4))])
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": task},
    ]
    for step in range(4):
        call_id = f"call_{index}_{step}"
        messages.append(
            {
                "role": "assistant",
                "content": f"thinking about step {step}",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "search", "arguments": json.dumps({"q": task})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": f"result {step} " + "data " * 40})
    return {"task_id": f"t{index}", "messages": messages, "score": 1.0 if success else 0.0, "metadata": {"query": task}}


async def run(flow: str, batch: int, requests: int, store: str, with_llm: bool, seed: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        app = ReMeApp(
            f"data_dir={tmp}", f"vector_store.default.backend={store}", "embedding_model.default.backend=hash", env={}
        )
        async with app:
            services = app.services
            assert services is not None
            llm = instant_llm()
            if with_llm:
                services.llms["default"] = llm
            embedder = CountingEmbedder(services.embedders["default"])
            services.store().inner.embedder = embedder  # the backend embeds; the wrapper only passes through
            rng = random.Random(seed)
            counter = 0

            def batch_of() -> list[dict[str, Any]]:
                nonlocal counter
                out = []
                for i in range(batch):
                    counter += 1
                    out.append(make_trajectory(rng, counter, success=i % 2 == 0))
                return out

            for _ in range(3):  # warm-up: imports, prompt files, first workspace
                result = await app.async_execute(name=flow, workspace_id="bench", trajectories=batch_of())
                assert result["success"], result
            llm.calls.clear()
            embedder.calls = embedder.texts = 0
            stored = 0
            times = []
            for _ in range(requests):
                trajectories = batch_of()
                start = time.perf_counter()
                result = await app.async_execute(name=flow, workspace_id="bench", trajectories=trajectories)
                times.append(time.perf_counter() - start)
                assert result["success"], result
                stored += len(result["metadata"]["memory_list"])
    n = batch * requests
    return {
        "ms_per_traj": statistics.median(times) * 1e3 / batch,
        "llm_calls": len(llm.calls) / n,
        "embed_calls": embedder.calls / n,
        "embed_texts": embedder.texts / n,
        "stored": stored / n,
    }


async def main(args: argparse.Namespace) -> None:
    print(f"store={args.store}, embedder=hash, {args.requests} timed requests per row (median)\n")
    header = f"{'flow':<28} {'llm':<8} {'batch':>5} {'ms/traj':>8} {'llm calls':>9} {'emb calls':>9}"
    print(header + f" {'emb texts':>9} {'stored':>7}")
    for flow in ("summary_task_memory", "summary_task_memory_simple"):
        for with_llm in (True, False):
            for batch in args.batch_sizes:
                r = await run(flow, batch, args.requests, args.store, with_llm, args.seed)
                print(
                    f"{flow:<28} {'instant' if with_llm else 'none':<8} {batch:>5} {r['ms_per_traj']:>8.3f} "
                    f"{r['llm_calls']:>9.2f} {r['embed_calls']:>9.2f} {r['embed_texts']:>9.2f} {r['stored']:>7.2f}"
                )
    print("\nper trajectory: llm calls, embedding calls (batched requests), embedded texts, memories stored")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 2, 8, 32])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--store", choices=("memory", "local"), default="local")
    parser.add_argument("--seed", type=int, default=7)
    asyncio.run(main(parser.parse_args()))
