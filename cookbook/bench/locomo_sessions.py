"""How far a session ranker of multi-turn windows could take session recall@5 on LoCoMo (the ceiling of a pick).

Every window of `size` consecutive turns of a session (a shorter session: the session) is embedded with the local
MiniLM and indexed by stemmed BM25. A session's score is (1 - a) × its best turn's score under the service's
ranking (cosine ⊕ BM25 over turns with their previous turn, w 0.4, speaker and time bonuses) + a × its best
window's score (cosine ⊕ BM25 at weight `wlex`). The figure is the ceiling of any pick of five turns from the five
best sessions (`locomo_cv.session_ceiling`'s measure): the share of questions whose evidence sessions are all among
them, overall, for one evidence session and for several. In-sample: no grid point reaching the target here, there
is nothing to cross-validate. Findings: docs/retrieval_quality.md.

    .venv/bin/python cookbook/bench/locomo_sessions.py
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
from pathlib import Path

import numpy as np
from locomo_cv import Conversation, embed_all, load_prepared, session_of
from locomo_recall import DEFAULT_DATA
from numpy.typing import NDArray

from reme_service.stores.lexical import LexicalIndex, fuse

Windows = tuple[list[str], list[str]]  # the windows' texts, each window's session


def windows_of(conv: Conversation, size: int) -> Windows:
    """Every run of `size` consecutive turns within a session; a session shorter than `size` is one window."""
    sessions = [session_of(d) for d in conv.dia_ids]
    texts: list[str] = []
    owners: list[str] = []
    for start, session in enumerate(sessions):
        end = start
        while end < len(sessions) and end < start + size and sessions[end] == session:
            end += 1
        first = start == 0 or sessions[start - 1] != session
        if end - start == size or first:
            texts.append("\n".join(conv.own[start:end]))
            owners.append(session)
    return texts, owners


def best_per(keys: list[str], scores: NDArray[np.float64]) -> dict[str, float]:
    best: dict[str, float] = {}
    for key, value in zip(keys, scores.tolist(), strict=True):
        best[key] = max(best.get(key, -1.0), value)
    return best


def ceiling(
    convs: list[Conversation],
    windows: dict[str, Windows],
    vectors: dict[str, NDArray[np.float32]],
    share: float,
    window_lexical: float,
) -> tuple[float, float, float]:
    one: list[float] = []
    several: list[float] = []
    for conv in convs:
        sessions = [session_of(d) for d in conv.dia_ids]
        texts, owners = windows[conv.sample_id]
        matrix = np.stack([vectors[t] for t in texts])
        index = LexicalIndex.build(texts, stem=True)
        for qi, (question, evidence, _) in enumerate(conv.questions):
            query = conv.vectors["query"][qi]
            turns = fuse((conv.vectors["context"] @ query).astype(np.float32), conv.lexical["context", True][qi], 0.4)
            turn_scores = turns.astype(np.float64) + 0.3 * conv.cues["speaker"][qi] + 0.2 * conv.cues["time"][qi]
            spans = fuse((matrix @ query).astype(np.float32), index.scores(question), window_lexical)
            by_turn = best_per(sessions, turn_scores)
            by_window = best_per(owners, spans.astype(np.float64))
            score = {s: (1 - share) * v + share * by_window.get(s, 0.0) for s, v in by_turn.items()}
            top = set(sorted(score, key=lambda s: -score[s])[:5])
            wanted = {session_of(e) for e in evidence}
            (one if len(wanted) == 1 else several).append(float(wanted <= top))
    both = one + several
    return sum(both) / len(both), sum(one) / max(len(one), 1), sum(several) / max(len(several), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "reme_locomo_cache")
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 5, 8], help="window sizes (turns)")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"error: LoCoMo data not found at {args.data} (pass --data)", file=sys.stderr)
        return 2
    convs = load_prepared(args.data, args.cache)
    windows = {(c.sample_id, size): windows_of(c, size) for c in convs for size in args.sizes}
    spans = sorted({t for texts, _ in windows.values() for t in texts})
    print(f"embedding {len(spans)} windows of {', '.join(map(str, args.sizes))} turns ...", flush=True)
    vectors = asyncio.run(embed_all(spans, "local", args.cache))
    header = f"{'window':>6} {'share':>6} {'w(BM25)':>8} {'s-rec@5':>8} {'one':>6} {'several':>8}"
    print(f"\n{header}   (ceiling, in-sample)")
    first = {c.sample_id: windows[c.sample_id, args.sizes[0]] for c in convs}
    overall, one, several = ceiling(convs, first, vectors, 0.0, 0.0)
    print(f"{'none':>6} {0:>6g} {'':>8} {overall:>8.3f} {one:>6.3f} {several:>8.3f}   (sessions by their best turn)")
    for size, share, lexical in itertools.product(args.sizes, (0.3, 0.5, 0.7, 1.0), (0.0, 0.4)):
        chosen = {c.sample_id: windows[c.sample_id, size] for c in convs}
        overall, one, several = ceiling(convs, chosen, vectors, share, lexical)
        print(f"{size:>6} {share:>6g} {lexical:>8g} {overall:>8.3f} {one:>6.3f} {several:>8.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
