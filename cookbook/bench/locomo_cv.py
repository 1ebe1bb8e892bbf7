"""Retrieval techniques on LoCoMo, each constant chosen by leave-one-conversation-out cross-validation.

Every turn of every conversation is one memory (as in `locomo_recall.py`); every question of categories 1-4 with
evidence is a query with k = 5. The texts are embedded once with the service's embedder (local MiniLM; cached in
`--cache`), and the rankings are computed here with the service's own scoring code: `LexicalIndex` (BM25, with or
without `light_stem`), `lexical.fuse` (cosine ⊕ BM25, weight w), a candidate pool of `POOL` by fused score, as
`RecallVectorStoreOp` fetches it, and the bonuses of `retrieval/rescore.py` on that pool. A technique is
a grid of constants; for each conversation in turn, the grid point with the best objective on the *other*
conversations (hit@1 + hit@5 + recall@5, summed over their questions) is applied to it, and the pooled figures over
all held-out questions are the cross-validated ones. The in-sample best is printed beside it.

Techniques: `stem` (BM25 terms through `light_stem`), `neighbour` (a turn embedded and indexed with the turn before
it in its session: "prev\\nturn"), `maxsim` (a turn's score is the best cosine of its own text, and of each of its
sentences), `speaker`, `name`, `phrase`, `number`, `time` (rescore bonuses), `session` (group → item: turns of
sessions with many strong candidates lifted), `diverse` (a turn penalised per turn of its session already chosen),
`combined` (the kept techniques tuned jointly), `two-stage` (over the combined choice: the session scored by the
sum or the best of its candidates, its weight, the diversification of the top 5 and the pool size), `pool`, and over
the two-stage choice `period` (a turn said in a period the question names: bonus, the period searched too — each
turn is dated by its session), `list` (a larger diversification for questions asking for a list) and both,
re-tuned with the session weight and diversity, `session-step`. `--captions` appends a shared image's caption to
its turn.
The bonuses, session scores and diversification are the service's own functions (`rescore.cue_bonuses`,
`group_scores`, `diversify`). Metrics: turn hit@1 / hit@5 / recall@5, and session recall@5 (every evidence session
among the sessions of the top 5 turns) and session hit@1 (the top turn's session is an evidence session).

The folds' objective is hit@1 + hit@5 + recall@5; `--session-weight W` adds W × session recall@5 (the service's
two-stage defaults are the choice at W = 3, pool 20: docs/retrieval_quality.md).

    .venv/bin/python cookbook/bench/locomo_cv.py                       # all techniques, MiniLM
    .venv/bin/python cookbook/bench/locomo_cv.py --only base stem speaker
    .venv/bin/python cookbook/bench/locomo_cv.py --only two-stage --session-weight 3 --pools 20
    .venv/bin/python cookbook/bench/locomo_cv.py --only period list session-step --session-weight 3 --pools 20
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from locomo_recall import CATEGORIES, DEFAULT_DATA, evidence_of, memory_of, session_dates, turns_of
from numpy.typing import NDArray

from reme_service.app import ReMeApp
from reme_service.retrieval.periods import query_periods, written_in
from reme_service.retrieval.rescore import (
    QueryCues,
    Rescoring,
    asks_for_list,
    cue_bonuses,
    diversify,
    group_scores,
)
from reme_service.stores.lexical import LexicalIndex, fuse

POOL = 50  # candidates rescored (RecallVectorStoreOp fetches max(2 * top_k, rescore_pool))
CUES = ("speaker", "name", "phrase", "number", "time")
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")
Row = tuple[float, float, float, float, float]  # hit@1, hit@5, recall@5, session recall@5, session hit@1
METRICS = ("hit@1", "hit@5", "recall@5", "s-rec@5", "s-hit@1")


def session_of(dia_id: str) -> str:
    return dia_id.split(":")[0]


@dataclass
class Conversation:
    sample_id: str
    dia_ids: list[str]
    own: list[str]  # "<speaker>: <text>"
    context: list[str]  # the previous turn of the same session, a newline, the turn
    parts: list[list[str]]  # a turn's sentences, each "<speaker>: <sentence>" (only turns of 2+ sentences)
    questions: list[tuple[str, set[str], str]] = field(default_factory=list)  # question, evidence, category
    vectors: dict[str, NDArray[np.float32]] = field(default_factory=dict)
    lexical: dict[tuple[str, bool], NDArray[np.float32]] = field(default_factory=dict)  # (texts, stem) -> (q, n)
    cues: dict[str, NDArray[np.float32]] = field(default_factory=dict)  # cue -> (q, n) unit bonuses
    written: list[NDArray[np.float64]] = field(default_factory=list)  # per question: 1 for turns of a named period
    lists: list[bool] = field(default_factory=list)  # per question: it asks for a list (`rescore.asks_for_list`)
    shift: NDArray[np.float32] | None = None  # per turn: subtracted from its cosine (locomo_vectors.py's hub term)


def with_captions(sample: dict[str, Any]) -> dict[str, Any]:
    """A copy of `sample` whose turns that share an image end with its caption (as `locomo_personal.py` writes)."""
    copy = json.loads(json.dumps(sample))
    for value in copy["conversation"].values():
        for turn in value if isinstance(value, list) else []:
            if turn.get("blip_caption"):
                turn["text"] = f"{turn['text']} [shares a photo: {turn['blip_caption']}]"
    return copy


def conversation_of(sample: dict[str, Any], moment: datetime | None = None) -> Conversation:
    """The conversation's turns and questions; the periods its questions name are read against `moment` (default:
    now, as the service reads them) and matched with each turn's session date (`periods.written_in`)."""
    turns = turns_of(sample)
    own = [memory_of(t)["content"] for t in turns]
    context = []
    for i, turn in enumerate(turns):
        previous = turns[i - 1] if i and session_of(turns[i - 1]["dia_id"]) == session_of(turn["dia_id"]) else None
        context.append(f"{own[i - 1]}\n{own[i]}" if previous is not None else own[i])
    parts = []
    for turn in turns:
        sentences = [s for s in SENTENCE_RE.split(turn["text"]) if s.strip()]
        parts.append([f"{turn['speaker']}: {s}" for s in sentences] if len(sentences) > 1 else [])
    conv = Conversation(str(sample["sample_id"]), [t["dia_id"] for t in turns], own, context, parts)
    dates = session_dates(sample)
    written_at = [dates.get(session_of(d)) for d in conv.dia_ids]
    for question in sample["qa"]:
        evidence = evidence_of(question)
        if question.get("category") in CATEGORIES and evidence:
            conv.questions.append((question["question"], evidence, CATEGORIES[question["category"]]))
            periods = query_periods(question["question"], moment or datetime.now())
            conv.written.append(np.array([float(written_in(at, periods)) for at in written_at]))
            conv.lists.append(asks_for_list(question["question"]))
    return conv


async def embed_all(texts: list[str], embedder: str, cache: Path) -> dict[str, NDArray[np.float32]]:
    """text -> vector with the service's embedder, cached on disk by the texts' digest."""
    unique = sorted(set(texts))
    digest = hashlib.sha256("\x00".join([embedder, *unique]).encode()).hexdigest()[:16]
    path = cache / f"locomo_{embedder}_{digest}.npy"
    if await asyncio.to_thread(path.is_file):
        matrix = await asyncio.to_thread(np.load, path)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            settings = (f"data_dir={tmp}", f"embedding_model.default.backend={embedder}")
            async with ReMeApp(*settings, env={}) as app:
                assert app.services is not None
                matrix = np.asarray(await app.services.embedders["default"].embed(unique), np.float32)
        await asyncio.to_thread(cache.mkdir, parents=True, exist_ok=True)
        await asyncio.to_thread(np.save, path, matrix)
    return dict(zip(unique, matrix, strict=True))


def prepare(convs: list[Conversation], vectors: dict[str, NDArray[np.float32]]) -> None:
    for conv in convs:
        conv.vectors["own"] = np.stack([vectors[t] for t in conv.own])
        conv.vectors["context"] = np.stack([vectors[t] for t in conv.context])
        conv.vectors["query"] = np.stack([vectors[q] for q, _, _ in conv.questions])
        for texts, stem in itertools.product(("own", "context"), (False, True)):
            index = LexicalIndex.build(getattr(conv, texts), stem=stem)
            conv.lexical[texts, stem] = np.stack([index.scores(q) for q, _, _ in conv.questions])
        queries = [QueryCues(q) for q, _, _ in conv.questions]
        for cue in CUES:
            unit = Rescoring.model_validate({f"{cue}_boost": 1.0})
            conv.cues[cue] = np.array([cue_bonuses(c, conv.own, unit) for c in queries], np.float32)
        # maxsim: the best cosine of a turn's own text and its sentences, per question
        q = conv.vectors["query"]
        best = q @ conv.vectors["own"].T
        for i, sentences in enumerate(conv.parts):
            if sentences:
                part = np.stack([vectors[s] for s in sentences])
                best[:, i] = np.maximum(best[:, i], (q @ part.T).max(axis=1))
        conv.vectors["maxsim"] = best


def load_prepared(data: Path, cache: Path, *, embedder: str = "local", captions: bool = False) -> list[Conversation]:
    """The conversations of a LoCoMo file, their texts embedded (cached in `cache`) and scored (`prepare`), saying
    what it does on stdout."""
    samples = json.loads(data.read_text(encoding="utf-8"))
    convs = [conversation_of(with_captions(sample) if captions else sample) for sample in samples]
    texts = [t for c in convs for t in c.own + c.context + [s for p in c.parts for s in p]]
    texts += [q for c in convs for q, _, _ in c.questions]
    print(f"LoCoMo: {data} ({len(convs)} conversations, {sum(len(c.questions) for c in convs)} questions)")
    print(f"embedding {len(set(texts))} texts with {embedder} (cache {cache}) ...", flush=True)
    prepare(convs, asyncio.run(embed_all(texts, embedder, cache)))
    return convs


@dataclass(frozen=True)
class Config:
    weight: float = 0.3  # BM25 share
    stem: bool = False
    neighbour: bool = False
    maxsim: bool = False
    boosts: tuple[tuple[str, float], ...] = ()  # (cue, bonus)
    session: float = 0.0  # group weight
    group_mode: str = "sum"  # a session's score from its candidates: "sum" or "max" (`rescore.group_scores`)
    diverse: float = 0.0  # penalty of a turn whose session is already among the chosen ones
    diverse_free: int = 0  # turns of a session chosen before its next one is penalised
    pool: int = POOL  # candidates rescored
    period: float = 0.0  # bonus of a turn said in a period the question names (before the pool is cut)
    list_diverse: float | None = None  # `diverse` for questions asking for a list (None: `diverse`)

    def label(self) -> str:
        parts = [f"w={self.weight:g}"] + [name for name in ("stem", "neighbour", "maxsim") if getattr(self, name)]
        parts += [f"{cue}={value:g}" for cue, value in self.boosts if value]
        parts += [f"session={self.session:g}"] if self.session else []
        parts += [f"group={self.group_mode}"] if self.session and self.group_mode != "sum" else []
        parts += [f"diverse={self.diverse:g}/{self.diverse_free}"] if self.diverse else []
        parts += [f"pool={self.pool}"] if self.pool != POOL else []
        parts += [f"period={self.period:g}"] if self.period else []
        parts += [f"list={self.list_diverse:g}"] if self.list_diverse is not None else []
        return " ".join(parts)


def rank(conv: Conversation, qi: int, config: Config) -> list[int]:
    """The top 5 turns of question `qi` under `config` (what the service would return)."""
    texts = "context" if config.neighbour else "own"
    cosine = conv.vectors["maxsim"][qi] if config.maxsim else conv.vectors[texts] @ conv.vectors["query"][qi]
    if conv.shift is not None:
        cosine = cosine - conv.shift
    fused = fuse(cosine.astype(np.float32), conv.lexical[texts, config.stem][qi], config.weight).astype(np.float64)
    if config.period:  # the op searches the period too, so its turns compete for the pool with their bonus
        fused = fused + config.period * conv.written[qi]
    pool = np.argpartition(-fused, min(config.pool, len(fused) - 1))[: config.pool]
    scores = fused[pool].astype(np.float64)
    base = scores.copy()
    for cue, value in config.boosts:
        scores += value * conv.cues[cue][qi][pool]
    sessions = [session_of(conv.dia_ids[i]) for i in pool]
    if config.session:
        scores += config.session * group_scores(sessions, base, config.group_mode)
    order = sorted(range(len(pool)), key=lambda j: (-scores[j], int(pool[j])))
    listing = config.list_diverse is not None and conv.lists[qi]
    penalty = config.list_diverse if listing and config.list_diverse is not None else config.diverse
    if penalty:
        weights = Rescoring(diversity=config.diverse, diversity_free=config.diverse_free)
        order = diversify(order, sessions, scores, 5, weights, penalty)
    return [int(pool[j]) for j in order[:5]]


def session_ceiling(convs: list[Conversation], config: Config, k: int = 5) -> tuple[float, float, float]:
    """What any pick of k turns from k distinct sessions could reach: the share of questions whose evidence sessions
    are all among the k sessions ranked best by their best turn (fused score plus the cue bonuses, every turn of
    the conversation, not only the pool) — overall, for questions of one evidence session, of several."""
    one: list[float] = []
    several: list[float] = []
    texts = "context" if config.neighbour else "own"
    for conv in convs:
        sessions = [session_of(d) for d in conv.dia_ids]
        for qi, (_, evidence, _) in enumerate(conv.questions):
            cosine = conv.vectors[texts] @ conv.vectors["query"][qi]
            scores = fuse(cosine.astype(np.float32), conv.lexical[texts, config.stem][qi], config.weight)
            scores = scores.astype(np.float64)
            for cue, value in config.boosts:
                scores += value * conv.cues[cue][qi]
            best: dict[str, float] = {}
            for session, value in zip(sessions, scores.tolist(), strict=True):
                best[session] = max(best.get(session, -1.0), value)
            top = set(sorted(best, key=lambda s: -best[s])[:k])
            wanted = {session_of(e) for e in evidence}
            (one if len(wanted) == 1 else several).append(float(wanted <= top))
    everything = one + several
    return sum(everything) / len(everything), sum(one) / max(len(one), 1), sum(several) / max(len(several), 1)


def score(conv: Conversation, qi: int, top: list[int]) -> Row:
    evidence = conv.questions[qi][1]
    ids = [conv.dia_ids[i] for i in top]
    wanted_sessions = {session_of(e) for e in evidence}
    sessions = {session_of(i) for i in ids}
    return (
        float(bool(evidence & set(ids[:1]))),
        float(bool(evidence & set(ids))),
        len(evidence & set(ids)) / len(evidence),
        float(wanted_sessions <= sessions),
        float(session_of(ids[0]) in wanted_sessions),
    )


def mean(rows: list[Row]) -> Row:
    n = max(len(rows), 1)
    return tuple(sum(col) / n for col in zip(*rows, strict=True)) if rows else (0.0,) * 5


def objective(rows: list[Row], session_weight: float = 0.0) -> float:
    """hit@1 + hit@5 + recall@5 (+ `session_weight` × session recall@5), summed over the questions."""
    return sum(r[0] + r[1] + r[2] + session_weight * r[3] for r in rows)


@dataclass
class Result:
    name: str
    cross: list[Row]
    cross_by_category: dict[str, list[Row]]
    chosen: dict[str, str]
    best_in_sample: tuple[str, Row]


def cross_validate(name: str, convs: list[Conversation], grid: Iterable[Config], session_weight: float = 0.0) -> Result:
    configs = list(dict.fromkeys(grid))
    rows = {c: {conv.sample_id: [score(conv, i, rank(conv, i, c)) for i in range(len(conv.questions))]
                for conv in convs} for c in configs}  # fmt: skip
    cross: list[Row] = []
    by_category: dict[str, list[Row]] = {}
    chosen: dict[str, str] = {}
    for conv in convs:
        others = [o.sample_id for o in convs if o is not conv]
        best = max(configs, key=lambda c: objective([r for o in others for r in rows[c][o]], session_weight))
        chosen[conv.sample_id] = best.label()
        cross += rows[best][conv.sample_id]
        for (_, _, category), row in zip(conv.questions, rows[best][conv.sample_id], strict=True):
            by_category.setdefault(category, []).append(row)
    in_sample = max(configs, key=lambda c: objective([r for v in rows[c].values() for r in v], session_weight))
    pooled = mean([r for v in rows[in_sample].values() for r in v])
    return Result(name, cross, by_category, chosen, (in_sample.label(), pooled))


WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
BOOSTS = (0.0, 0.02, 0.05, 0.1, 0.2)
CHOSEN = {"speaker": 0.3, "time": 0.2}  # the combined grid's choice in every fold (the service's defaults)


def grids(kept: Config, pool_sizes: tuple[int, ...] = (20, 50)) -> dict[str, Callable[[], Iterable[Config]]]:
    """Technique -> its grid, each alone over the base (w tuned with it), and `combined` around `kept`."""
    base = Config()

    def with_weights(**fields: Any) -> Iterable[Config]:
        return (Config(**{**base.__dict__, "weight": w, **fields}) for w in WEIGHTS)

    def cue(name: str) -> Iterable[Config]:
        return (c for b in BOOSTS for c in with_weights(boosts=((name, b),)))

    return {
        "base": lambda: with_weights(),
        "stem": lambda: with_weights(stem=True),
        "neighbour": lambda: with_weights(neighbour=True),
        "maxsim": lambda: with_weights(maxsim=True),
        **{name: partial(cue, name) for name in CUES},
        "session": lambda: (c for s in BOOSTS for c in with_weights(session=s)),
        "diverse": lambda: (c for s in BOOSTS for c in with_weights(diverse=s)),
        "combined": lambda: combined(kept),
        "two-stage": lambda: two_stage(kept, pool_sizes),
        "pool": lambda: pools(kept),
        "period": lambda: session_step(kept, lists=(None,), diverse=(0.1,), sessions=(0.5,)),
        "list": lambda: session_step(kept, periods=(0.0,), diverse=(0.1,), sessions=(0.5,)),
        "session-step": lambda: session_step(kept),
    }


SERVICE: dict[str, Any] = {"weight": 0.4, "group_mode": "max", "pool": 20}  # the two-stage choice (W = 3, pool 20)


def session_step(
    kept: Config,
    periods: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.5),
    lists: tuple[float | None, ...] = (None, 0.2, 0.3, 0.5, 1.0),
    diverse: tuple[float, ...] = (0.05, 0.1, 0.2),
    sessions: tuple[float, ...] = (0.3, 0.5, 0.7),
) -> Iterable[Config]:
    """Over the two-stage choice: the bonus of a turn said in a period the question names (`period_boost`), the
    diversification of questions asking for a list (`list_diversity`), re-tuned with the session weight and the
    diversification of the others."""
    boosts = tuple((cue, CHOSEN.get(cue, value)) for cue, value in kept.boosts)
    for period, listing, diversity, session in itertools.product(periods, lists, diverse, sessions):
        yield Config(**{**kept.__dict__, **SERVICE, "boosts": boosts, "session": session, "diverse": diversity,
                        "period": period, "list_diverse": listing})  # fmt: skip


def pools(kept: Config) -> Iterable[Config]:
    """The rescored pool's size (the store exports that many hits per query) at the service's weights."""
    boosts = tuple((cue, CHOSEN.get(cue, value)) for cue, value in kept.boosts)
    for pool, session in itertools.product((10, 15, 20, 30, 50), (0.1, 0.3)):
        yield Config(**{**kept.__dict__, "weight": 0.4, "boosts": boosts, "session": session, "pool": pool})


def two_stage(kept: Config, pools: tuple[int, ...] = (20, 50)) -> Iterable[Config]:
    """Session → turn variants over the kept techniques at their chosen cue weights: the session score's form (the
    sum or the max of its candidates' scores, `rescore.group_scores`), its weight, the diversification of the top 5
    (`rescore.diversify`: the penalty of a turn per turn of its session already chosen beyond `free`) and the pool
    rescored (the hits the store exports)."""
    diversity = [(0.0, 0), (0.02, 0), (0.05, 0), (0.1, 0), (0.2, 0), (0.3, 0), (0.1, 1), (0.3, 1)]
    boosts = tuple((cue, CHOSEN.get(cue, value)) for cue, value in kept.boosts)
    for weight, mode, session, (diverse, free), pool in itertools.product(
        (0.4, 0.5), ("sum", "max"), (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0), diversity, pools
    ):
        yield Config(**{**kept.__dict__, "weight": weight, "boosts": boosts, "group_mode": mode, "pool": pool,
                        "session": session, "diverse": diverse, "diverse_free": free})  # fmt: skip


def combined(kept: Config) -> Iterable[Config]:
    """A joint grid around the techniques passed with --combine."""
    cues = [cue for cue, _ in kept.boosts]
    for weight, session, diverse, *values in itertools.product(
        (0.3, 0.4, 0.5),
        (0.0, 0.1, 0.2) if kept.session else (0.0,),
        (0.0, 0.05, 0.1) if kept.diverse else (0.0,),
        *[(0.0, 0.05, 0.1, 0.2, 0.3)] * len(cues),
    ):
        yield Config(
            weight=weight,
            stem=kept.stem,
            neighbour=kept.neighbour,
            maxsim=kept.maxsim,
            boosts=tuple(zip(cues, values, strict=True)),
            session=session,
            diverse=diverse,
        )


def print_result(result: Result, count: int) -> None:
    figures = " ".join(f"{v:>8.3f}" for v in mean(result.cross))
    label, pooled = result.best_in_sample
    print(f"{result.name:<10} {figures}   in-sample best {' '.join(f'{v:.3f}' for v in pooled)} at {label}")
    if len(set(result.chosen.values())) > 1:
        print(f"{'':<10} chosen per fold: {result.chosen}")
    else:
        print(f"{'':<10} chosen in every fold: {next(iter(result.chosen.values()))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "reme_locomo_cache")
    parser.add_argument("--only", nargs="+", help="techniques to run (default: all)")
    parser.add_argument(
        "--combine",
        nargs="*",
        default=["stem", "neighbour", "speaker", "time", "session"],
        help="techniques the `combined` grid tunes jointly",
    )
    parser.add_argument("--categories", action="store_true", help="print the cross-validated figures per category")
    parser.add_argument("--ceiling", action="store_true", help="print the session recall@5 reachable by diversifying")
    parser.add_argument("--captions", action="store_true", help="turns that share an image end with its caption")
    parser.add_argument("--pools", type=int, nargs="+", default=[20, 50], help="pool sizes the two-stage grid tries")
    parser.add_argument(
        "--session-weight",
        type=float,
        default=0.0,
        help="weight of session recall@5 in the folds' objective (default 0: hit@1 + hit@5 + recall@5)",
    )
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"error: LoCoMo data not found at {args.data} (pass --data)", file=sys.stderr)
        return 2
    convs = load_prepared(args.data, args.cache, embedder=args.embedder, captions=args.captions)
    kept = Config(
        stem="stem" in args.combine,
        neighbour="neighbour" in args.combine,
        maxsim="maxsim" in args.combine,
        boosts=tuple((cue, 0.05) for cue in CUES if cue in args.combine),
        session=0.05 if "session" in args.combine else 0.0,
        diverse=0.05 if "diverse" in args.combine else 0.0,
    )
    count = sum(len(c.questions) for c in convs)
    if args.ceiling:
        shipped = Config(
            **{
                **kept.__dict__,
                "weight": 0.4,
                "session": 0.0,
                "boosts": tuple((c, CHOSEN.get(c, v)) for c, v in kept.boosts),
            }
        )
        overall, one, several = session_ceiling(convs, shipped)
        print(
            f"session recall@5 ceiling (5 turns from the 5 sessions of best turns, {shipped.label()}): {overall:.3f} "
            f"(one evidence session {one:.3f}, several {several:.3f})"
        )
    print(f"\n{'technique':<10} {' '.join(f'{m:>8}' for m in METRICS)}   (leave-one-conversation-out)")
    for name, grid in grids(kept, tuple(args.pools)).items():
        if args.only and name not in args.only:
            continue
        result = cross_validate(name, convs, grid(), args.session_weight)
        print_result(result, count)
        if args.categories:
            for category, rows in sorted(result.cross_by_category.items()):
                print(f"{'':<4}{category:<12} n={len(rows):<4}" + " ".join(f"{v:>8.3f}" for v in mean(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
