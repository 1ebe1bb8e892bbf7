"""The hybrid fusion weight chosen by leave-one-conversation-out cross-validation on LoCoMo, and the figure it gives.

The memory store holds every turn of every conversation (one workspace each; `locomo_recall.py`'s memories, the
local MiniLM embedder). Each question of categories 1-4 with evidence is searched once per weight of `--weights`
(`search_hybrid(top_k=5, lexical_weight=w)`, what `retrieve_task_memory` does without an LLM). Then, for each
conversation in turn, the weight with the best hit@5 on the *other* conversations (recall@5 breaks ties) is used on
it: the pooled figures over all questions are the cross-validated ones, beside the best in-sample weight's.

    .venv/bin/python cookbook/bench/locomo_cv.py
    .venv/bin/python cookbook/bench/locomo_cv.py --weights 0 0.2 0.3 0.5 --embedder hash
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from locomo_recall import CATEGORIES, DEFAULT_DATA, evidence_of, store_conversation

from reme_service.app import ReMeApp

Scores = tuple[float, float, float]  # hit@1, hit@5, recall@5


def mean(rows: list[Scores]) -> Scores:
    n = max(len(rows), 1)
    return (sum(r[0] for r in rows) / n, sum(r[1] for r in rows) / n, sum(r[2] for r in rows) / n)


async def score_all(
    data: list[dict[str, Any]], weights: list[float], embedder: str
) -> dict[str, dict[float, list[Scores]]]:
    """conversation -> weight -> one (hit@1, hit@5, recall@5) per question."""
    out: dict[str, dict[float, list[Scores]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        args = (f"data_dir={tmp}", "vector_store.default.backend=memory", f"embedding_model.default.backend={embedder}")
        async with ReMeApp(*args, env={}) as app:
            assert app.services is not None
            store = app.services.store()
            for sample in data:
                workspace = await store_conversation(app, sample)
                per_weight: dict[float, list[Scores]] = {w: [] for w in weights}
                for question in sample["qa"]:
                    evidence = evidence_of(question)
                    if question.get("category") not in CATEGORIES or not evidence:
                        continue
                    for weight in weights:
                        hits = await store.search_hybrid(
                            workspace, question["question"], top_k=5, lexical_weight=weight
                        )
                        ids = [(hit.node.metadata.get("metadata") or {}).get("dia_id") for hit in hits]
                        per_weight[weight].append(
                            (
                                float(bool(evidence & set(ids[:1]))),
                                float(bool(evidence & set(ids[:5]))),
                                len(evidence & set(ids[:5])) / len(evidence),
                            )
                        )
                out[sample["sample_id"]] = per_weight
                print(f"  {sample['sample_id']}: {len(per_weight[weights[0]])} questions", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7])
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"error: LoCoMo data not found at {args.data} (pass --data)", file=sys.stderr)
        return 2
    data = json.loads(args.data.read_text(encoding="utf-8"))
    print(f"LoCoMo: {args.data} ({len(data)} conversations), embedder {args.embedder}, weights {args.weights}")
    scores = asyncio.run(score_all(data, args.weights, args.embedder))
    conversations = list(scores)

    def pooled(weight: float, among: list[str]) -> Scores:
        return mean([row for c in among for row in scores[c][weight]])

    print(f"\n{'weight':>6} {'hit@1':>7} {'hit@5':>7} {'recall@5':>9}   (in-sample, all conversations)")
    for weight in args.weights:
        h1, h5, r5 = pooled(weight, conversations)
        print(f"{weight:>6.2f} {h1:>7.3f} {h5:>7.3f} {r5:>9.3f}")
    chosen: dict[str, float] = {}
    cross: list[Scores] = []
    for held in conversations:
        others = [c for c in conversations if c != held]
        best = max(args.weights, key=lambda w: (pooled(w, others)[1], pooled(w, others)[2]))
        chosen[held] = best
        cross.extend(scores[held][best])
    h1, h5, r5 = mean(cross)
    print(f"\nleave-one-conversation-out: weights chosen {chosen}")
    print(f"cross-validated: hit@1 {h1:.3f}  hit@5 {h5:.3f}  recall@5 {r5:.3f}  ({len(cross)} questions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
