"""The service's own cost of the task-retrieval rescoring: `retrieve_task_memory` with and without it, interleaved.

Every LoCoMo turn is stored as a memory (as `locomo_recall.py` stores them: neighbour context, `session`
metadata; one workspace per conversation, memory store) with the **hash** embedder, so the query embedding costs
next to nothing and what is timed is the service: the store's hybrid search, the rescoring of its pool and the
memories built. Two flows answer every question, alternately, in one process, so the machine's load falls on
both alike:

* `plain`: `RecallVectorStoreOp` with every bonus at 0 (fusion only; the store exports 2 × top_k hits);
* `rescored`: the default `RecallVectorStoreOp()` (the pool of `rescore_pool` = 50 hits rescored).

Reported: p50 / p95 / mean of each (ms, `async_execute` in-process, no HTTP) and the p50 difference, over
`--rounds` passes of the 760 questions after one warm-up pass. On a shared machine run it twice and compare.

    python cookbook/bench/recall_latency.py
    python cookbook/bench/recall_latency.py --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from locomo_recall import CATEGORIES, DEFAULT_DATA, FLOW, evidence_of, store_conversation

from reme_service.app import ReMeApp
from reme_service.config.loader import FLOWS_DIR
from reme_service.testing.percentiles import percentile

FLOWS = {
    "plain": "RecallVectorStoreOp(speaker_boost=0, time_boost=0, period_boost=0, group_weight=0, list_diversity=None)",
    "rescored": "RecallVectorStoreOp()",
}


async def measure(
    data: list[dict[str, Any]], rounds: int, top_k: int, flows: dict[str, str] = FLOWS
) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        overlay = Path(tmp) / "flows.yaml"
        task = yaml.safe_load((FLOWS_DIR / "task.yaml").read_text(encoding="utf-8"))["flow"]["retrieve_task_memory"]
        configured = {
            f"retrieve_{name}": {**task, "flow_content": FLOW.format(recall=recall)} for name, recall in flows.items()
        }
        overlay.write_text(json.dumps({"flow": configured}))
        app = ReMeApp(
            f"config={overlay}", f"data_dir={tmp}", "vector_store.default.backend=memory",
            "embedding_model.default.backend=hash", "log_level=WARNING", env={},
        )  # fmt: skip
        questions: list[tuple[str, str]] = []
        async with app:
            for sample in data:
                workspace = await store_conversation(app, sample)
                questions += [
                    (workspace, q["question"])
                    for q in sample["qa"]
                    if q.get("category") in CATEGORIES and evidence_of(q)
                ]
            times: dict[str, list[float]] = {name: [] for name in flows}
            for round_ in range(rounds + 1):  # the first pass warms up (lexical indexes, caches)
                for i, (workspace, question) in enumerate(questions):
                    order = list(flows) if (i + round_) % 2 == 0 else list(reversed(flows))
                    for name in order:
                        begin = time.perf_counter()
                        result = await app.async_execute(
                            name=f"retrieve_{name}", workspace_id=workspace, query=question, top_k=top_k
                        )
                        elapsed = time.perf_counter() - begin
                        if not result["success"]:
                            raise RuntimeError(f"{name} failed: {result['metadata']}")
                        if round_:
                            times[name].append(elapsed * 1e3)
        return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rounds", type=int, default=2, help="timed passes over the questions")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--rescored", default=FLOWS["rescored"], help="the rescored flow's recall op (a variant)")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"error: LoCoMo data not found at {args.data} (pass --data)", file=sys.stderr)
        return 2
    data = json.loads(args.data.read_text(encoding="utf-8"))
    times = asyncio.run(measure(data, args.rounds, args.top_k, {**FLOWS, "rescored": args.rescored}))
    for name, values in times.items():
        print(
            f"{name:<9} n={len(values)}  p50 {statistics.median(values):.3f} ms  "
            f"p95 {percentile(values, 95):.3f} ms  mean {statistics.fmean(values):.3f} ms"
        )
    delta = statistics.median(times["rescored"]) - statistics.median(times["plain"])
    print(f"rescoring adds {delta:+.3f} ms at p50 (hash embedder, in-process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
