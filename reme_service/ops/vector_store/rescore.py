"""Query-aware rescoring of retrieval candidates: cues of the query text matched in the candidates' texts.

A search ranks by similarity (cosine, or cosine fused with BM25); some cues of a question are exact and cheap
to check in a candidate's text, and a similarity score blurs them. `rescore` adds a bonus per matched cue to
each candidate's score (scores are in [0, 1]; the default bonuses are a tenth to a third of that):

* `speaker_boost` — the candidate is a line said by someone the query names: its text starts with
  `"<Name>: "` (the form conversational memories are written in) and `Name` is a capitalised word of the query;
* `name_boost` — per capitalised word of the query (a name: not a stopword) found as a word in the candidate,
  over the number of such words;
* `phrase_boost` — a quoted phrase of the query (`"..."`, `'...'`, `“...”`) found in the candidate;
* `number_boost` — a number of the query (`\\d+`, e.g. a year) found as a number in the candidate;
* `time_boost` — the query asks *when* (`time_expressions.asks_about_time`) and the candidate mentions time
  (`has_time_word`: "yesterday", "last week", a month, a date);
* `group_weight` — two-stage group → item search: candidates that share a group (`group_of`, e.g. the session a
  turn belongs to) are scored as a group first (the sum of the group's candidate scores, over the best group's
  sum), and each candidate gets `group_weight` × its group's score.

Every bonus is off at 0. Which are on by default, and at what weights, was chosen by leave-one-conversation-out
cross-validation on LoCoMo dev (`cookbook/bench/locomo_cv.py`, docs/retrieval_quality.md).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from reme_service.ops.personal.time_expressions import asks_about_time, has_time_word
from reme_service.stores.lexical import STOPWORDS

_NAME_RE = re.compile(r"\b[A-Z][\w'-]*\w\b")
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)?")
_QUOTED_RE = re.compile(r"\"([^\"]{2,})\"|“([^”]{2,})”|(?<!\w)'([^']{2,})'(?!\w)")
_SPEAKER_RE = re.compile(r"^\s*([^:\n]{1,40}):\s")
_POSSESSIVE_RE = re.compile(r"'s?$")


class Rescoring(BaseModel):
    """The bonus weights (0 = off). Op params embed it; the benches build it directly."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    speaker_boost: float = 0.0
    name_boost: float = 0.0
    phrase_boost: float = 0.0
    number_boost: float = 0.0
    time_boost: float = 0.0
    group_weight: float = 0.0

    @property
    def active(self) -> bool:
        return any(value > 0.0 for value in self.model_dump().values())


class QueryCues:
    """What `rescore` looks for, read from the query once."""

    __slots__ = ("names", "numbers", "phrases", "when")

    def __init__(self, query: str) -> None:
        names = {_POSSESSIVE_RE.sub("", word) for word in _NAME_RE.findall(query)}
        self.names = sorted(n for n in names if n.lower() not in STOPWORDS and len(n) > 1)
        self.numbers = frozenset(_NUMBER_RE.findall(query))
        self.phrases = [next(g for g in m.groups() if g).strip().casefold() for m in _QUOTED_RE.finditer(query)]
        self.when = asks_about_time(query)


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) is not None


def cue_bonus(cues: QueryCues, text: str, weights: Rescoring) -> float:
    """The bonus `text` earns for the query's cues (group scores aside)."""
    bonus = 0.0
    if cues.names and (weights.speaker_boost or weights.name_boost):
        if weights.speaker_boost and (speaker := _SPEAKER_RE.match(text)) and speaker.group(1).strip() in cues.names:
            bonus += weights.speaker_boost
        if weights.name_boost:
            found = sum(1 for name in cues.names if _has_word(text, name))
            bonus += weights.name_boost * found / len(cues.names)
    if weights.phrase_boost and cues.phrases:
        folded = text.casefold()
        if any(phrase in folded for phrase in cues.phrases):
            bonus += weights.phrase_boost
    if weights.number_boost and cues.numbers and cues.numbers & set(_NUMBER_RE.findall(text)):
        bonus += weights.number_boost
    if weights.time_boost and cues.when and has_time_word(text):
        bonus += weights.time_boost
    return bonus


def rescore(
    query: str,
    texts: Sequence[str],
    scores: Sequence[float],
    weights: Rescoring,
    groups: Sequence[str | None] | None = None,
) -> list[float]:
    """The candidates' scores with their bonuses added (same order as `texts`)."""
    if not weights.active:
        return list(scores)
    cues = QueryCues(query)
    out = [float(score) + cue_bonus(cues, text, weights) for text, score in zip(texts, scores, strict=True)]
    if weights.group_weight and groups is not None:
        sums: dict[str, float] = defaultdict(float)
        for group, score in zip(groups, scores, strict=True):
            if group is not None:
                sums[group] += max(float(score), 0.0)
        top = max(sums.values(), default=0.0)
        if top > 0.0:
            for i, group in enumerate(groups):
                if group is not None:
                    out[i] += weights.group_weight * sums[group] / top
    return out
