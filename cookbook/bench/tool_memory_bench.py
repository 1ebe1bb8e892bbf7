"""Tool-memory benchmark: does reading tool memories help an LLM pick the right tool? (ReMe's protocol)

Three mock search tools (`use_mock_search`) each work well on one query complexity only. Per epoch:

1. **train**: every train query goes to `use_mock_search`, and its call record to `add_tool_call_result` in the
   train workspace, where the LLM judge scores it (0 or 1);
2. **test without memory**: every test query, the same way, into a fresh workspace;
3. **summarise**: `summary_tool_memory` then `retrieve_tool_memory` on the train workspace for the tools used;
4. **test with memory**: every test query again, now prefixed with the retrieved guidelines
   ("Tool Information / <memories> / Must select one tool to answer / Query / <query>"), into a fresh workspace;
5. the mean judge scores of the three phases are compared.

The service runs in this process (`ReMeApp`, in-memory store, hash embedder); the LLM is any OpenAI-compatible
endpoint:

    .venv/bin/python cookbook/bench/tool_memory_bench.py --base-url https://host/v1 --api-key KEY --model NAME

(`--base-url` / `--api-key` default to FLOW_LLM_BASE_URL / FLOW_LLM_API_KEY, `--model` to REME_BENCH_MODEL or
the service default). The queries are generated here: `--train-per-level` and `--test-per-level` per complexity
(simple, medium, complex; ReMe used 20 and 20), `--epochs` rounds (ReMe: 3), `--concurrency` requests at a time
(ReMe: 4). Calls whose judgement failed (null score) are counted and left out of the means.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from reme_service.app import ReMeApp

LEVELS = ("simple", "medium", "complex")
BEST_TOOL = {"simple": "search_tool_a", "medium": "search_tool_b", "complex": "search_tool_c"}
_SUBJECTS = (
    "photosynthesis", "the French Revolution", "quantum entanglement", "the stock market", "volcanoes",
    "machine learning", "the Roman Empire", "climate change", "vaccines", "blockchain", "the human heart",
    "jazz music", "plate tectonics", "renewable energy", "the printing press", "black holes", "inflation",
    "coral reefs", "the internet", "antibiotics",
)  # fmt: skip
_TEMPLATES = {
    "simple": (
        "What is {s}?",
        "Give a one-line definition of {s}.",
        "When did people first learn about {s}?",
    ),
    "medium": (
        "How does {s} work, and what are its main stages?",
        "Explain the main causes and effects of {s}.",
        "What are the most common misconceptions about {s}, and why do they persist?",
    ),
    "complex": (
        "Compare {s} with {t} in terms of history, mechanisms and long-term impact, and explain which matters more "
        "for policy makers today.",
        "Analyse the trade-offs researchers face when studying {s}, and propose a step by step research plan that "
        "also draws on {t}.",
        "Evaluate competing explanations of {s}, weigh the evidence for each, and explain how {t} changes the picture.",
    ),
}


def make_queries(per_level: int, seed: int) -> dict[str, list[str]]:
    """`per_level` distinct queries per complexity, drawn with a fixed seed."""
    rng = random.Random(seed)
    out: dict[str, list[str]] = {}
    for level in LEVELS:
        pool = [
            template.format(s=s, t=rng.choice([x for x in _SUBJECTS if x != s]))
            for template in _TEMPLATES[level]
            for s in _SUBJECTS
        ]
        rng.shuffle(pool)
        if per_level > len(pool):
            raise SystemExit(f"at most {len(pool)} queries per level")
        out[level] = pool[:per_level]
    return out


@dataclass
class Phase:
    name: str
    scores: dict[str, list[float]] = field(default_factory=lambda: {level: [] for level in LEVELS})
    unknown: int = 0
    tools: Counter[tuple[str, str]] = field(default_factory=Counter)

    def mean(self, level: str | None = None) -> float | None:
        values = self.scores[level] if level else [v for vs in self.scores.values() for v in vs]
        return statistics.fmean(values) if values else None

    def best_tool_rate(self) -> float | None:
        total = sum(self.tools.values())
        hits = sum(n for (level, tool), n in self.tools.items() if BEST_TOOL[level] == tool)
        return hits / total if total else None


class Bench:
    def __init__(self, app: ReMeApp, concurrency: int) -> None:
        self.app = app
        self.gate = asyncio.Semaphore(concurrency)

    async def call(self, flow: str, **fields: Any) -> dict[str, Any]:
        result = await self.app.async_execute(name=flow, **fields)
        if not result["success"]:
            raise SystemExit(f"{flow} failed: {json.dumps(result['metadata'].get('error'))}")
        return result

    async def one(self, phase: Phase, workspace: str, level: str, query: str, seed: int, prefix: str) -> None:
        async with self.gate:
            found = await self.call("use_mock_search", query=prefix + query, seed=seed)
            record = found["metadata"]["tool_call_result"]
            phase.tools[(level, record["tool_name"])] += 1
            added = await self.call("add_tool_call_result", workspace_id=workspace, tool_call_results=[record])
        score = added["metadata"]["evaluations"][0]["score"]
        if score is None:
            phase.unknown += 1
        else:
            phase.scores[level].append(score)

    async def phase(
        self, phase: Phase, workspace: str, queries: dict[str, list[str]], seed: int, prefix: str = ""
    ) -> Phase:
        jobs = [self.one(phase, workspace, level, q, seed, prefix) for level in LEVELS for q in queries[level]]
        await asyncio.gather(*jobs)
        return phase


def memory_prefix(guidelines: str) -> str:
    return f"Tool Information\n{guidelines}\nMust select one tool to answer\nQuery\n"


async def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    env = {"FLOW_LLM_BASE_URL": args.base_url, "FLOW_LLM_API_KEY": args.api_key or "none"} if args.base_url else {}
    overrides = [
        "vector_store.default.backend=memory",
        "embedding_model.default.backend=hash",
        'enabled_flows=["use_mock_search", "add_tool_call_result", "summary_tool_memory", "retrieve_tool_memory"]',
    ]
    if args.model:
        overrides.append(f"llm.default.model_name={args.model}")
    train = make_queries(args.train_per_level, seed=args.seed)
    test = make_queries(args.train_per_level + args.test_per_level, seed=args.seed)
    test = {level: test[level][args.train_per_level :] for level in LEVELS}
    phases: dict[str, list[Phase]] = {"train": [], "test_without_memory": [], "test_with_memory": []}
    async with ReMeApp(*overrides, env=env) as app:
        bench = Bench(app, args.concurrency)
        for epoch in range(args.epochs):
            seed = args.seed + epoch
            phases["train"].append(await bench.phase(Phase("train"), "bench_train", train, seed))
            plain = await bench.phase(Phase("test_without_memory"), f"bench_plain_{epoch}", test, seed)
            phases["test_without_memory"].append(plain)
            used = sorted({tool for p in phases["train"] for (_, tool) in p.tools if tool != "None"})
            prefix = ""
            if used:
                await bench.call("summary_tool_memory", workspace_id="bench_train", tool_names=used)
                retrieved = await bench.call("retrieve_tool_memory", workspace_id="bench_train", tool_names=used)
                prefix = memory_prefix(retrieved["answer"])
            with_memory = await bench.phase(Phase("test_with_memory"), f"bench_memory_{epoch}", test, seed, prefix)
            phases["test_with_memory"].append(with_memory)
            print(
                f"epoch {epoch + 1}/{args.epochs}: "
                + ", ".join(f"{n} {_fmt(ps[-1].mean())}" for n, ps in phases.items())
            )
    return summarise(phases)


def _fmt(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:.3f}"


def summarise(phases: dict[str, list[Phase]]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, runs in phases.items():
        merged = Phase(name)
        for run in runs:
            for level in LEVELS:
                merged.scores[level] += run.scores[level]
            merged.unknown += run.unknown
            merged.tools.update(run.tools)
        figures[name] = {
            "mean": merged.mean(),
            "by_level": {level: merged.mean(level) for level in LEVELS},
            "scored_calls": sum(len(v) for v in merged.scores.values()),
            "unknown_scores": merged.unknown,
            "best_tool_rate": merged.best_tool_rate(),
        }
    before, after = figures["test_without_memory"]["mean"], figures["test_with_memory"]["mean"]
    figures["relative_gain"] = (after - before) / before if before and after is not None else None
    return figures


def print_figures(figures: dict[str, Any]) -> None:
    print(f"\n{'phase':22} {'mean':>6} {'simple':>7} {'medium':>7} {'complex':>8} {'best tool':>10} {'unknown':>8}")
    for name in ("train", "test_without_memory", "test_with_memory"):
        row = figures[name]
        levels = " ".join(f"{_fmt(row['by_level'][level]):>7}" for level in LEVELS)
        best = "n/a" if row["best_tool_rate"] is None else f"{row['best_tool_rate']:.0%}"
        print(f"{name:22} {_fmt(row['mean']):>6} {levels}  {best:>10} {row['unknown_scores']:>8}")
    gain = figures["relative_gain"]
    print(f"\nwith memory vs without: {'n/a' if gain is None else f'{gain:+.2%}'} (relative, mean judge score)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", default=os.environ.get("FLOW_LLM_BASE_URL", ""))
    parser.add_argument("--api-key", default=os.environ.get("FLOW_LLM_API_KEY", ""))
    parser.add_argument("--model", default=os.environ.get("REME_BENCH_MODEL", ""))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train-per-level", type=int, default=20)
    parser.add_argument("--test-per-level", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if not args.base_url:
        print("no LLM given (--base-url or FLOW_LLM_BASE_URL): running the no-LLM paths (random tool choice)")
    figures = asyncio.run(run_bench(args))
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
