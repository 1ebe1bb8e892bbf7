"""Corrections of MiniLM's vector space on LoCoMo, measured by leave-one-conversation-out cross-validation.

Each correction changes the vectors (or the cosine) before the service's ranking (`locomo_cv.rank` at the
service's defaults: cosine ⊕ stemmed BM25 over turns indexed with their previous turn, the speaker, time and
period bonuses, the session → turn step, the diversified pick); the BM25 weight is re-chosen with it from 0.3 /
0.4 / 0.5. The folds' objective is hit@1 + hit@5 + recall@5 + 3 × session recall@5, as for the service's choice.

* `centre`: the conversation's mean turn vector, times λ, taken from the turns and the question (λ ∈ 0.5, 1), or
  from the turns only;
* `abtt` ("all but the top"): the conversation's first D principal directions removed from every vector (D ∈ 1, 2,
  5), after centring or not;
* `hub`: a turn's cosine less λ × its mean cosine to its k nearest turns (k ∈ 5, 10, 50; λ ∈ 0.1-0.5): generic
  small talk that resembles every question resembles many turns too (the CSLS correction);
* `mix`: the turn's own vector mixed into its neighbour-context vector (a × context + (1 - a) × own).

Findings: docs/retrieval_quality.md (none passes the service; none is built).

    .venv/bin/python cookbook/bench/locomo_vectors.py
    .venv/bin/python cookbook/bench/locomo_vectors.py --only hub
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from locomo_adapter import line, service_config
from locomo_cv import METRICS, Conversation, Row, load_prepared, objective, rank, score
from locomo_recall import DEFAULT_DATA
from numpy.typing import NDArray

Vectors = NDArray[np.float32]
SESSION_WEIGHT = 3.0


@dataclass(frozen=True)
class Correction:
    centre: float = 0.0  # λ: the mean turn vector times λ taken from every turn
    centre_query: bool = True  # ... and from the question
    drop: int = 0  # principal directions removed
    hub: float = 0.0  # λ of the hub term
    hub_k: int = 10
    mix: float = 1.0  # share of the neighbour-context vector (the rest: the turn's own)

    def label(self) -> str:
        parts = [f"centre={self.centre:g}{'' if self.centre_query else ' (turns only)'}"] if self.centre else []
        parts += [f"drop={self.drop}"] if self.drop else []
        parts += [f"hub={self.hub:g}/k={self.hub_k}"] if self.hub else []
        parts += [f"mix={self.mix:g}"] if self.mix != 1.0 else []
        return " ".join(parts) or "none"


def unit(matrix: NDArray[np.float64]) -> Vectors:
    norms = np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    return (matrix / norms).astype(np.float32)


def apply(conv: Conversation, original: dict[str, Vectors], correction: Correction) -> None:
    """Set the conversation's vectors (and cosine shift) to the corrected ones."""
    own = original["own"].astype(np.float64)
    context = correction.mix * original["context"] + (1 - correction.mix) * own
    query = original["query"].astype(np.float64)
    mean = context.mean(axis=0)
    context, own = context - correction.centre * mean, own - correction.centre * mean
    if correction.centre_query:
        query = query - correction.centre * mean
    if correction.drop:
        _, _, directions = np.linalg.svd(original["context"] - mean, full_matrices=False)
        top = directions[: correction.drop]
        context, own, query = (m - (m @ top.T) @ top for m in (context, own, query))
    conv.vectors["context"], conv.vectors["own"], conv.vectors["query"] = unit(context), unit(own), unit(query)
    conv.shift = None
    if correction.hub:
        similar = conv.vectors["context"] @ conv.vectors["context"].T
        np.fill_diagonal(similar, -1.0)
        nearest = np.sort(similar, axis=1)[:, -correction.hub_k :]
        conv.shift = (correction.hub * nearest.mean(axis=1)).astype(np.float32)


def grids() -> dict[str, Callable[[], Iterable[Correction]]]:
    return {
        "centre": lambda: (
            Correction(centre=c, centre_query=q) for c, q in itertools.product((0.0, 0.5, 1.0), (True, False))
        ),
        "abtt": lambda: (Correction(centre=c, drop=d) for c, d in itertools.product((0.0, 1.0), (0, 1, 2, 5))),
        "hub": lambda: (
            Correction(hub=h, hub_k=k) for h, k in itertools.product((0.0, 0.1, 0.2, 0.3, 0.5), (5, 10, 50))
        ),
        "mix": lambda: (Correction(mix=a) for a in (1.0, 0.8, 0.6, 0.4)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "reme_locomo_cache")
    parser.add_argument("--only", nargs="+", choices=sorted(grids()), help="corrections to run (default: all)")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"error: LoCoMo data not found at {args.data} (pass --data)", file=sys.stderr)
        return 2
    convs = load_prepared(args.data, args.cache)
    originals = {c.sample_id: {k: c.vectors[k].copy() for k in ("own", "context", "query")} for c in convs}
    service = service_config()
    print(f"\n{'correction':<34}" + " ".join(f"{m:>8}" for m in METRICS))
    for name, grid in grids().items():
        if args.only and name not in args.only:
            continue
        rows: dict[tuple[Correction, float], dict[str, list[Row]]] = {}
        for correction in grid():
            for conv in convs:
                apply(conv, originals[conv.sample_id], correction)
            for weight in (0.3, 0.4, 0.5):
                config = replace(service, weight=weight)
                rows[correction, weight] = {
                    c.sample_id: [score(c, qi, rank(c, qi, config)) for qi in range(len(c.questions))] for c in convs
                }
        cross: list[Row] = []
        chosen: list[str] = []
        for conv in convs:
            others = [o.sample_id for o in convs if o is not conv]
            best = max(rows, key=lambda key: objective([r for o in others for r in rows[key][o]], SESSION_WEIGHT))
            cross += rows[best][conv.sample_id]
            chosen.append(f"{best[0].label()} w={best[1]:g}")
        in_sample = max(rows, key=lambda key: objective([r for v in rows[key].values() for r in v], SESSION_WEIGHT))
        print(line(f"{name} cross-validated", cross))
        print(line(f"{name} in-sample best", [r for v in rows[in_sample].values() for r in v]), end="")
        print(f"   at {in_sample[0].label()} w={in_sample[1]:g}")
        print(f"{'':<4}chosen per fold: {'; '.join(chosen)}", flush=True)
    for conv in convs:
        apply(conv, originals[conv.sample_id], Correction())
    return 0


if __name__ == "__main__":
    sys.exit(main())
