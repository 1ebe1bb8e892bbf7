"""Personal-memory retrieval on LoCoMo: the rescoring constants of `retrieve_personal_memory`, each chosen by
leave-one-conversation-out cross-validation.

The memories are written as `locomo_personal.py` writes them (every session of each speaker through
`summary_personal_memory`, no LLM, local MiniLM) and every question of categories 1-4 is asked as it asks them
(`user_name` the speaker it names, both when it names both or neither; at the last session's date; k = 5). A grid
point is a copy of the service's `retrieve_personal_memory` flow with `FuseRerankOp`'s (and `RetrieveMemoryOp`'s)
parameters set to it, run through the app: the figures are those of the service's own code. For each conversation
in turn, the grid point with the best objective on the *other* conversations (hit@1 + hit@5 + recall@5 summed
over their questions; `--session-weight W` adds W × session recall@5) is applied to it, and the pooled figures
over all held-out questions are the cross-validated ones; the in-sample best is printed beside them.

Techniques (each alone over the service before them, then `combined` over the kept ones):

* `period` — a question naming a period ("in May 2023", read by `ExtractTimeOp`) searches inside it (memories said
  in it, `periods.period_filter`, or about it, `memories.event_filter`) instead of filtering a wider search, and the
  memories matching it get `period_boost` on top of `fuse_time_ratio`;
* `time` — `time_boost` (`rescore.py`: a "when" question and a memory mentioning time) besides, or instead of,
  `fuse_time_question_ratio`;
* `name`, `number` — `rescore.py`'s name and number matches in the memory's text;
* `session` — two-stage search over the day a memory was said (`group_key` `msg_date`: a LoCoMo session);
* `diverse` — the pick diversified over those days (`diversity`, and `list_diversity` for list questions);
* `weight` — the BM25 share of RetrieveMemoryOp's search, and its candidate count.

    .venv/bin/python cookbook/bench/locomo_personal_cv.py
    .venv/bin/python cookbook/bench/locomo_personal_cv.py --only base period session --categories
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from locomo_personal import DEFAULT_DATA, ask, evidence_ids, ingest, sessions, sources, targets

from reme_service.app import ReMeApp
from reme_service.config.loader import FLOWS_DIR

Row = tuple[float, float, float, float]  # hit@1, hit@5, recall@5, session recall@5
METRICS = ("hit@1", "hit@5", "recall@5", "s-rec@5")
K = 5
Params = tuple[tuple[str, Any], ...]


# the service before this step, spelt out so the grid points stay what they were whatever the defaults become
BEFORE: dict[str, Any] = {
    "period_search": False,
    "period_boost": 0.0,
    "fuse_time_ratio": 2.0,
    "fuse_time_question_ratio": 1.2,
    "time_boost": 0.0,
    "name_boost": 0.0,
    "number_boost": 0.0,
    "group_weight": 0.0,
    "group_mode": "sum",
    "diversity": 0.0,
    "list_diversity": None,
    "time_recall_top_k": 50,
    "retrieve_lexical_weight": 0.4,
    "retrieve_recall_top_k": 20,
}


@dataclass(frozen=True)
class Config:
    params: Params  # every key of BEFORE; `retrieve_` ones are RetrieveMemoryOp's, the others FuseRerankOp's

    def label(self) -> str:
        changed = [f"{k}={v}" for k, v in self.params if BEFORE[k] != v]
        return " ".join(changed) or "service before"

    def flow_content(self, base: str) -> str:
        fuse = [f"{k}={v!r}" for k, v in self.params if not k.startswith("retrieve_")]
        retrieve = [f"{k[len('retrieve_') :]}={v!r}" for k, v in self.params if k.startswith("retrieve_")]
        content = base.replace("FuseRerankOp()", f"FuseRerankOp({', '.join(fuse)})")
        return content.replace("RetrieveMemoryOp()", f"RetrieveMemoryOp({', '.join(retrieve)})")


def config(**changes: Any) -> Config:
    unknown = set(changes) - set(BEFORE)
    assert not unknown, unknown
    return Config(tuple(sorted({**BEFORE, **changes}.items())))


def product(**axes: Iterable[Any]) -> Iterable[Config]:
    names = list(axes)
    for values in itertools.product(*axes.values()):
        yield config(**dict(zip(names, values, strict=True)))


def grids() -> dict[str, Iterable[Config]]:
    period: dict[str, list[Any]] = {
        "period_search": [True],
        "period_boost": [0.0, 0.1, 0.3],
        "fuse_time_ratio": [1.5, 2.0, 3.0],
    }
    return {
        "base": [config()],
        "period": product(**period),
        "time": product(time_boost=[0.05, 0.1, 0.2], fuse_time_question_ratio=[1.0, 1.2]),
        "name": product(name_boost=[0.05, 0.1, 0.2]),
        "number": product(number_boost=[0.05, 0.1, 0.2]),
        "session": product(group_weight=[0.1, 0.2, 0.3, 0.5], group_mode=["max", "sum"]),
        "diverse": product(diversity=[0.0, 0.05, 0.1, 0.2], list_diversity=[None, 0.1, 0.3]),
        "weight": product(retrieve_lexical_weight=[0.3, 0.4, 0.5], retrieve_recall_top_k=[20, 50]),
        "combined": product(
            retrieve_lexical_weight=[0.3, 0.4],
            group_weight=[0.0, 0.5, 0.7, 1.0, 1.5],
            group_mode=["max"],
            time_boost=[0.0, 0.1, 0.2],
            diversity=[0.0, 0.05],
            period_search=[True],
        ),
        # the wider time search reaching less of the user's memories, as in a big workspace: is the period searched?
        "narrow": product(time_recall_top_k=[5, 10], period_search=[False, True]),
    }


def score(top: list[dict[str, Any]], evidence: set[str]) -> Row:
    ids = [str(m["metadata"].get("source_metadata", {}).get("dia_id")) for m in top]
    wanted_sessions = {e.split(":")[0] for e in evidence}
    return (
        float(bool(evidence & set(ids[:1]))),
        float(bool(evidence & sources(top))),
        len(evidence & set(ids)) / len(evidence),
        float(wanted_sessions <= {i.split(":")[0] for i in ids}),
    )


def mean(rows: list[Row]) -> Row:
    n = max(len(rows), 1)
    return tuple(sum(col) / n for col in zip(*rows, strict=True)) if rows else (0.0,) * 4


def objective(rows: list[Row], session_weight: float) -> float:
    return sum(r[0] + r[1] + r[2] + session_weight * r[3] for r in rows)


async def evaluate(
    app: ReMeApp, flow: str, data: list[dict[str, Any]]
) -> tuple[dict[str, list[Row]], dict[str, list[str]]]:
    """Rows per conversation and the category of each question."""
    rows: dict[str, list[Row]] = {}
    categories: dict[str, list[str]] = {}
    for sample in data:
        conversation = sample["conversation"]
        workspace = f"locomo_{sample['sample_id']}"
        speakers = (conversation["speaker_a"], conversation["speaker_b"])
        asked_at = sessions(conversation)[-1][0]
        key = str(sample["sample_id"])
        rows[key], categories[key] = [], []
        for qa in sample["qa"]:
            if qa.get("category") not in (1, 2, 3, 4) or not evidence_ids(qa):
                continue
            top = await ask(app, flow, workspace, qa["question"], targets(qa["question"], speakers), asked_at, K)
            rows[key].append(score(top, evidence_ids(qa)))
            categories[key].append(f"category {qa['category']}")
    return rows, categories


def cross_validate(
    results: dict[Config, dict[str, list[Row]]], session_weight: float
) -> tuple[dict[str, list[Row]], dict[str, str], tuple[str, Row]]:
    """Held-out rows per conversation, the choice per fold, and the in-sample best."""
    held: dict[str, list[Row]] = {}
    chosen: dict[str, str] = {}
    conversations = list(next(iter(results.values())))
    for conv in conversations:
        others = [c for c in conversations if c != conv]
        best = max(results, key=lambda cfg: objective([r for o in others for r in results[cfg][o]], session_weight))
        held[conv] = results[best][conv]
        chosen[conv] = best.label()
    in_sample = max(results, key=lambda cfg: objective([r for v in results[cfg].values() for r in v], session_weight))
    return held, chosen, (in_sample.label(), mean([r for v in results[in_sample].values() for r in v]))


async def main(args: argparse.Namespace, data: list[dict[str, Any]]) -> None:
    flows = yaml.safe_load((FLOWS_DIR / "personal.yaml").read_text(encoding="utf-8"))["flow"]
    base = flows["retrieve_personal_memory"]
    techniques = {name: list(dict.fromkeys(grid)) for name, grid in grids().items() if name in args.only}
    configs = list(dict.fromkeys(c for grid in techniques.values() for c in grid))
    names = {c: f"cv_{i}" for i, c in enumerate(configs)}
    overlay = {"flow": {names[c]: {**base, "flow_content": c.flow_content(base["flow_content"])} for c in configs}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "grid.yaml"
        path.write_text(yaml.safe_dump(overlay), encoding="utf-8")
        settings = (f"config={path}", f"data_dir={tmp}", "vector_store.default.backend=memory")
        async with ReMeApp(*settings, f"embedding_model.default.backend={args.embedder}", env={}) as app:
            for sample in data:
                await ingest(app, sample, f"locomo_{sample['sample_id']}")
            print(f"{len(data)} conversations ingested; {len(configs)} grid points", flush=True)
            results: dict[Config, dict[str, list[Row]]] = {}
            categories: dict[str, list[str]] = {}
            start = time.perf_counter()
            for i, cfg in enumerate(configs):
                results[cfg], categories = await evaluate(app, names[cfg], data)
                if args.verbose:
                    print(f"  [{i + 1}/{len(configs)} {time.perf_counter() - start:.0f} s] {cfg.label()}: "
                          + " ".join(f"{v:.3f}" for v in mean([r for v in results[cfg].values() for r in v])),
                          flush=True)  # fmt: skip
    count = sum(len(v) for v in categories.values())
    print(
        f"\n{count} questions; {'technique':<9} {' '.join(f'{m:>8}' for m in METRICS)}   (leave-one-conversation-out)"
    )
    for name, grid in techniques.items():
        held, chosen, (label, pooled) = cross_validate({c: results[c] for c in grid}, args.session_weight)
        figures = " ".join(f"{v:>8.3f}" for v in mean([r for v in held.values() for r in v]))
        print(f"{name:<10} {figures}   in-sample best {' '.join(f'{v:.3f}' for v in pooled)} at {label}")
        distinct = set(chosen.values())
        print(f"{'':<10} chosen {'in every fold: ' + next(iter(distinct)) if len(distinct) == 1 else chosen}")
        if args.categories:
            by_category: dict[str, list[Row]] = {}
            for conv, rows in held.items():
                for category, row in zip(categories[conv], rows, strict=True):
                    by_category.setdefault(category, []).append(row)
            for category, rows in sorted(by_category.items()):
                print(f"{'':<4}{category:<12} n={len(rows):<4}" + " ".join(f"{v:>8.3f}" for v in mean(rows)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="LoCoMo JSON file")
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument("--only", nargs="+", default=list(grids()), help="techniques to run (default: all)")
    parser.add_argument("--categories", action="store_true", help="cross-validated figures per category")
    parser.add_argument("--session-weight", type=float, default=0.0, help="weight of session recall@5 in the folds")
    parser.add_argument("--verbose", action="store_true", help="print each grid point's in-sample figures")
    arguments = parser.parse_args()
    if not Path(arguments.data).is_file():
        sys.exit(f"LoCoMo data not found at {arguments.data}")
    samples = json.loads(Path(arguments.data).read_text(encoding="utf-8"))
    asyncio.run(main(arguments, samples))
