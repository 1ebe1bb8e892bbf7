"""A learned linear query adapter on LoCoMo, measured by leave-one-conversation-out cross-validation.

The query's MiniLM vector q becomes (I + A) q, renormalised, before the service's ranking (`locomo_cv.rank` with the
service's defaults: cosine ⊕ stemmed BM25 over turns indexed with their previous turn, speaker, time and period
bonuses, the session → turn step and the diversified pick). A is trained on the questions of the *other*
conversations: a softmax over every turn of the question's conversation at temperature `--tau`, the evidence turns
as the target (`--target session` adds the other turns of the evidence sessions at a third of the weight), Adam,
L2 weight `--lam` on A. `--diagonal` restricts A to a diagonal (a re-weighting of the 384 dimensions). The adapter
trained on all conversations and applied to them is printed too: the in-sample figure, what it could do if it
generalised. Findings: docs/retrieval_quality.md (not built: it learns the conversations, not the questions).

    .venv/bin/python cookbook/bench/locomo_adapter.py --lam 0.001 0.01 0.1
    .venv/bin/python cookbook/bench/locomo_adapter.py --diagonal --lam 0.001 0.01
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from locomo_cv import (
    METRICS,
    SERVICE,
    Config,
    Conversation,
    Row,
    load_prepared,
    mean,
    rank,
    score,
    session_of,
)
from locomo_recall import DEFAULT_DATA
from numpy.typing import NDArray

Matrix = NDArray[np.float64]
DIMENSIONS = 384  # MiniLM


@dataclass(frozen=True)
class Training:
    lam: float
    tau: float
    steps: int
    rate: float
    target: str  # "turn" or "session"
    diagonal: bool


def service_config() -> Config:
    """The service's ranking (docs/retrieval_quality.md: every fold's choice)."""
    return Config(
        **{
            **Config(stem=True, neighbour=True, boosts=(("speaker", 0.3), ("time", 0.2))).__dict__,
            **SERVICE,
            "session": 0.5,
            "diverse": 0.1,
            "period": 0.3,
            "list_diverse": 0.3,
        }
    )


def targets(conv: Conversation, qi: int, target: str) -> Matrix:
    evidence = conv.questions[qi][1]
    wanted = np.array([float(d in evidence) for d in conv.dia_ids])
    if target == "session":
        sessions = {session_of(e) for e in evidence}
        wanted += np.array([float(session_of(d) in sessions) for d in conv.dia_ids]) / 3
    return wanted / wanted.sum()


def train(convs: list[Conversation], queries: dict[str, Matrix], training: Training) -> Matrix:
    """A (d × d) minimising the mean softmax cross-entropy of the questions' evidence over their conversation's
    turns, plus lam/2 · |A|²."""
    batches = [
        (
            queries[c.sample_id],
            c.vectors["context"].astype(np.float64),
            np.stack([targets(c, qi, training.target) for qi in range(len(c.questions))]),
        )
        for c in convs
    ]
    count = sum(len(q) for q, _, _ in batches)
    adapter = np.zeros((DIMENSIONS, DIMENSIONS))
    first = np.zeros_like(adapter)
    second = np.zeros_like(adapter)
    for step in range(1, training.steps + 1):
        gradient = training.lam * adapter
        for q, turns, wanted in batches:
            z = q + q @ adapter.T
            norms = np.linalg.norm(z, axis=1, keepdims=True)
            u = z / norms
            logits = u @ turns.T / training.tau
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            gu = (p - wanted) @ turns / training.tau
            gz = (gu - u * (u * gu).sum(axis=1, keepdims=True)) / norms
            gradient += gz.T @ q / count
        if training.diagonal:
            gradient = np.diag(np.diag(gradient))
        first = 0.9 * first + 0.1 * gradient
        second = 0.999 * second + 0.001 * gradient**2
        adapter -= training.rate * (first / (1 - 0.9**step)) / (np.sqrt(second / (1 - 0.999**step)) + 1e-8)
    return adapter


def ranked(conv: Conversation, query: Matrix, adapter: Matrix | None, config: Config) -> list[Row]:
    z = query if adapter is None else query + query @ adapter.T
    conv.vectors["query"] = (z / np.linalg.norm(z, axis=1, keepdims=True)).astype(np.float32)
    return [score(conv, qi, rank(conv, qi, config)) for qi in range(len(conv.questions))]


def line(label: str, rows: list[Row]) -> str:
    return f"{label:<34}" + " ".join(f"{v:>8.3f}" for v in mean(rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "reme_locomo_cache")
    parser.add_argument("--lam", type=float, nargs="+", default=[0.001, 0.01, 0.1], help="L2 weights tried")
    parser.add_argument("--tau", type=float, default=0.05, help="softmax temperature")
    parser.add_argument("--steps", type=int, default=100, help="Adam steps")
    parser.add_argument("--rate", type=float, default=0.05, help="Adam learning rate")
    parser.add_argument("--target", choices=("turn", "session"), default="turn")
    parser.add_argument("--diagonal", action="store_true", help="a diagonal adapter (one weight per dimension)")
    parser.add_argument("--no-in-sample", action="store_true", help="skip the in-sample figures")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"error: LoCoMo data not found at {args.data} (pass --data)", file=sys.stderr)
        return 2
    convs = load_prepared(args.data, args.cache)
    queries = {c.sample_id: c.vectors["query"].astype(np.float64) for c in convs}
    config = service_config()
    kind = "diagonal" if args.diagonal else "full"
    print(f"\n{'adapter':<34}" + " ".join(f"{m:>8}" for m in METRICS))
    print(line("none (the service)", [r for c in convs for r in ranked(c, queries[c.sample_id], None, config)]))
    for lam in args.lam:
        training = Training(lam, args.tau, args.steps, args.rate, args.target, args.diagonal)
        cross: list[Row] = []
        for held in convs:
            adapter = train([c for c in convs if c is not held], queries, training)
            cross += ranked(held, queries[held.sample_id], adapter, config)
        print(line(f"{kind} lam={lam:g} cross-validated", cross), flush=True)
        if not args.no_in_sample:
            adapter = train(convs, queries, training)
            rows = [r for c in convs for r in ranked(c, queries[c.sample_id], adapter, config)]
            print(line(f"{kind} lam={lam:g} in-sample", rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
