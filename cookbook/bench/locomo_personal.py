"""Personal memory on LoCoMo: evidence hit@k of `retrieve_personal_memory`, with and without time fusion, and
the flow's server-side latency at 10k personal memories. No LLM: the deterministic path throughout.

    .venv/bin/python cookbook/bench/locomo_personal.py                      # ../shared/data/locomo_dev.json
    .venv/bin/python cookbook/bench/locomo_personal.py path/to/locomo10.json --embedder hash

Ingestion: for each conversation and each of its two speakers, every session goes through
`summary_personal_memory` as one trajectory — that speaker's turns as `user` messages, the other's as
`assistant` — with the session's date as each message's `time_created` and the turn's `dia_id` in the message
metadata (an image's caption, when a turn shares one, is appended to its text). Retrieval: every scorable
question (categories 1-4) goes to `retrieve_personal_memory` with `top_k` = k, asked at the last session's
date, with `user_name` set to the speaker it names (both speakers, results merged by rank score, when it names
both or neither). A question is a hit when one of its evidence turns is the source of one of the k memories.

Latency: a workspace of 10,000 personal memories of one user (the LoCoMo observations, copied with their
vectors) is queried with every question once, in a fresh app per flow so no query embedding is cached; the time
is `ReMeApp.async_execute` (request validation, the flow, the store searches and the query embedding; no HTTP).
It is measured with the chosen embedder and with the hash embedder, whose near-zero cost leaves the service's own
time (the hash query vectors do not match MiniLM's space, but the work done per query is the same).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from reme_service.app import ReMeApp
from reme_service.config.loader import FLOWS_DIR
from reme_service.retrieval.timestamps import normalise_timestamp
from reme_service.schema.vector_node import VectorNode

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "locomo_dev.json"
PLAIN_FLOW = "retrieve_personal_memory_without_time"
COSINE_FLOW = "retrieve_personal_memory_cosine"
UNRESCORED_FLOW = "retrieve_personal_memory_unrescored"
LABELS = {
    "retrieve_personal_memory": "time fusion, cosine + BM25",
    UNRESCORED_FLOW: "the same before rescoring",
    PLAIN_FLOW: "without time fusion",
    COSINE_FLOW: "time fusion, cosine only",
}
# FuseRerankOp and RetrieveMemoryOp as they were before the rescoring step (docs/retrieval_quality.md)
UNRESCORED = {
    "FuseRerankOp()": "FuseRerankOp(group_weight=0.0, time_boost=0.0, period_search=False)",
    "RetrieveMemoryOp()": "RetrieveMemoryOp(lexical_weight=0.4)",
}


def overlay_with_plain_flow(directory: Path) -> Path:
    """A config overlay adding copies of retrieve_personal_memory whose FuseRerankOp ignores time, whose
    RetrieveMemoryOp ranks by cosine alone (`hybrid=False`: the default before it fused BM25 in,
    docs/retrieval_quality.md), and whose ops rank as before the rescoring (`UNRESCORED`)."""
    flows = yaml.safe_load((FLOWS_DIR / "personal.yaml").read_text(encoding="utf-8"))["flow"]
    plain = dict(flows["retrieve_personal_memory"])
    plain["flow_content"] = plain["flow_content"].replace("FuseRerankOp()", "FuseRerankOp(enable_time_fusion=False)")
    assert "enable_time_fusion=False" in plain["flow_content"]
    cosine = dict(flows["retrieve_personal_memory"])
    cosine["flow_content"] = cosine["flow_content"].replace("RetrieveMemoryOp()", "RetrieveMemoryOp(hybrid=False)")
    assert "hybrid=False" in cosine["flow_content"]
    unrescored = dict(flows["retrieve_personal_memory"])
    for op, before in UNRESCORED.items():
        assert op in unrescored["flow_content"]
        unrescored["flow_content"] = unrescored["flow_content"].replace(op, before)
    path = directory / "plain.yaml"
    overlay = {"flow": {PLAIN_FLOW: plain, COSINE_FLOW: cosine, UNRESCORED_FLOW: unrescored}}
    path.write_text(yaml.safe_dump(overlay), encoding="utf-8")
    return path


def sessions(conversation: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(normalised date, turns) of each session, in order."""
    numbers = sorted(int(m.group(1)) for k in conversation if (m := re.fullmatch(r"session_(\d+)", k)))
    return [
        (normalise_timestamp(conversation[f"session_{n}_date_time"]), conversation[f"session_{n}"]) for n in numbers
    ]


def turn_text(turn: dict[str, Any]) -> str:
    caption = turn.get("blip_caption")
    return f"{turn['text']} [shares a photo: {caption}]" if caption else turn["text"]


async def ingest(app: ReMeApp, sample: dict[str, Any], workspace: str) -> int:
    conversation = sample["conversation"]
    stored = 0
    for speaker in (conversation["speaker_a"], conversation["speaker_b"]):
        for date, turns in sessions(conversation):
            messages = [
                {
                    "role": "user" if turn["speaker"] == speaker else "assistant",
                    "content": turn_text(turn),
                    "time_created": date,
                    "metadata": {"dia_id": turn["dia_id"]},
                }
                for turn in turns
            ]
            result = await app.async_execute(
                name="summary_personal_memory",
                workspace_id=workspace,
                user_name=speaker,
                trajectories=[{"messages": messages}],
            )
            if not result["success"]:
                raise SystemExit(f"summary failed: {result['metadata']}")
            stored += result["metadata"]["update_result"]["inserted_count"]
    return stored


def evidence_ids(qa: dict[str, Any]) -> set[str]:
    return {e for item in qa["evidence"] for e in re.findall(r"D\d+:\d+", str(item).replace("D:", "D"))}


def targets(question: str, speakers: tuple[str, str]) -> list[str]:
    named = [s for s in speakers if re.search(rf"\b{re.escape(s)}\b", question, re.IGNORECASE)]
    return named if len(named) == 1 else list(speakers)


async def ask(
    app: ReMeApp, flow: str, workspace: str, question: str, users: list[str], query_time: str, k: int
) -> list[dict[str, Any]]:
    merged: list[dict[str, Any]] = []
    for user in users:
        result = await app.async_execute(
            name=flow, workspace_id=workspace, query=question, user_name=user, query_time=query_time, top_k=k
        )
        if not result["success"]:
            raise SystemExit(f"retrieval failed: {result['metadata']}")
        merged += result["metadata"]["memory_list"]
    merged.sort(key=lambda m: m.get("rank_score", m["fused_score"]), reverse=True)  # with the rescoring bonuses
    return merged[:k]


def sources(memories: list[dict[str, Any]]) -> set[str]:
    return {str(m["metadata"].get("source_metadata", {}).get("dia_id")) for m in memories}


async def evaluate(app: ReMeApp, data: list[dict[str, Any]], k: int) -> dict[str, dict[str, list[int]]]:
    """flow → category → hit flags."""
    hits: dict[str, dict[str, list[int]]] = {flow: defaultdict(list) for flow in LABELS}
    for sample in data:
        conversation = sample["conversation"]
        workspace = f"locomo_{sample['sample_id']}"
        speakers = (conversation["speaker_a"], conversation["speaker_b"])
        asked_at = sessions(conversation)[-1][0]
        for qa in sample["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            wanted = evidence_ids(qa)
            for flow in hits:
                top = await ask(app, flow, workspace, qa["question"], targets(qa["question"], speakers), asked_at, k)
                hit = int(bool(sources(top) & wanted))
                hits[flow]["all"].append(hit)
                hits[flow][f"category {qa['category']}"].append(hit)
    return hits


async def coverage(app: ReMeApp, data: list[dict[str, Any]]) -> tuple[int, int]:
    """(evidence turns that became a memory, evidence turns) over scorable questions."""
    covered = total = 0
    for sample in data:
        listed = await app.async_execute(
            name="vector_store", workspace_id=f"locomo_{sample['sample_id']}", action="list"
        )
        stored = sources(listed["metadata"]["action_result"])
        for qa in sample["qa"]:
            if qa.get("category") in (1, 2, 3, 4):
                ids = evidence_ids(qa)
                covered += len(ids & stored)
                total += len(ids)
    return covered, total


async def latency_nodes(app: ReMeApp, data: list[dict[str, Any]], size: int) -> list[VectorNode]:
    """`size` copies of the stored LoCoMo memories (vectors included), all of one user."""
    store = app.services.store() if app.services else None
    assert store is not None
    base: list[VectorNode] = []
    for sample in data:
        base += await store.list_nodes(f"locomo_{sample['sample_id']}", with_vectors=True)
    return [
        base[i % len(base)].model_copy(
            update={
                "unique_id": f"n{i}",
                "workspace_id": "bench10k",
                "metadata": {**base[i % len(base)].metadata, "target": "bench_user"},
            }
        )
        for i in range(size)
    ]


async def latency(
    overrides: tuple[str, ...], embedder: str, nodes: list[VectorNode], data: list[dict[str, Any]]
) -> None:
    """p50 / p95 of each retrieval flow, each in a fresh app (so no query embedding is cached), every question once."""
    questions = [qa["question"] for s in data for qa in s["qa"] if qa.get("category") in (1, 2, 3, 4)]
    asked_at = sessions(data[-1]["conversation"])[-1][0]
    for flow, label in LABELS.items():
        async with ReMeApp(*overrides, f"embedding_model.default.backend={embedder}", env={}) as app:
            assert app.services is not None
            await app.services.store().upsert("bench10k", nodes)
            await app.services.embedders["default"].embed(["warm-up"])  # loads the model's weights
            samples = []
            for question in questions:
                start = time.perf_counter()
                result = await app.async_execute(
                    name=flow,
                    workspace_id="bench10k",
                    query=question,
                    user_name="bench_user",
                    query_time=asked_at,
                    top_k=5,
                )
                samples.append(time.perf_counter() - start)
                assert result["success"], result
        samples.sort()
        p50 = statistics.median(samples) * 1e3
        p95 = samples[int(len(samples) * 0.95)] * 1e3
        print(f"  {embedder:<5} query embedding, {label:<26} p50 {p50:6.2f} ms   p95 {p95:6.2f} ms")


def report(hits: dict[str, dict[str, list[int]]], k: int) -> None:
    print(f"\nevidence hit@{k}")
    for flow, by_category in hits.items():
        parts = [f"{c} {sum(v) / len(v):.3f} (n={len(v)})" for c, v in sorted(by_category.items())]
        print(f"  {LABELS[flow]:<26} " + "   ".join(parts))


async def main(args: argparse.Namespace, data: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        overrides = (
            f"config={overlay_with_plain_flow(Path(tmp))}",
            f"data_dir={tmp}",
            "vector_store.default.backend=memory",
        )
        async with ReMeApp(*overrides, f"embedding_model.default.backend={args.embedder}", env={}) as app:
            start = time.perf_counter()
            stored = sum([await ingest(app, sample, f"locomo_{sample['sample_id']}") for sample in data])
            turns = sum(len(t) for s in data for _, t in sessions(s["conversation"]))
            print(
                f"{len(data)} conversations, {turns} turns -> {stored} personal memories "
                f"in {time.perf_counter() - start:.1f} s ({args.embedder} embedder, no LLM)"
            )
            covered, total = await coverage(app, data)
            print(f"evidence turns that became a memory: {covered}/{total} ({covered / total:.3f})")
            report(await evaluate(app, data, args.k), args.k)
            nodes = await latency_nodes(app, data, args.latency_memories) if args.latency_memories else []
        if nodes:
            print(f"\nserver-side latency of retrieve_personal_memory at {len(nodes):,} personal memories (no LLM)")
            for embedder in dict.fromkeys((args.embedder, "hash")):
                await latency(overrides, embedder, nodes, data)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="LoCoMo JSON file")
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--latency-memories", type=int, default=10_000, help="0 skips the latency run")
    arguments = parser.parse_args()
    if not Path(arguments.data).is_file():
        sys.exit(
            f"LoCoMo data not found at {arguments.data}: pass the path of locomo_dev.json (or LoCoMo's "
            "locomo10.json) as the first argument"
        )
    samples = json.loads(Path(arguments.data).read_text(encoding="utf-8"))[: arguments.conversations]
    asyncio.run(main(arguments, samples))
