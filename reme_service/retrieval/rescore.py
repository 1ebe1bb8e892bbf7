"""Query-aware rescoring of retrieval candidates: cues of the query text matched in the candidates' texts.

A search ranks by similarity (cosine, or cosine fused with BM25); some cues of a question are exact and cheap
to check in a candidate's text, and a similarity score blurs them. `rescore` adds a bonus per matched cue to
each candidate's score (scores are in [0, 1]; the default bonuses are a fifth to a half of that):

* `speaker_boost` — the candidate is a line said by someone the query names: its text starts with
  `"<Name>: "` (the form conversational memories are written in) and `Name` is a capitalised word of the query;
* `name_boost` — per capitalised word of the query (a name: not a stopword) found as a word in the candidate,
  over the number of such words;
* `phrase_boost` — a quoted phrase of the query (`"..."`, `'...'`, `“...”`) found in the candidate;
* `number_boost` — a number of the query (`\\d+`, e.g. a year) found as a number in the candidate;
* `time_boost` — the query asks *when* (`time_expressions.asks_about_time`) and the candidate mentions time
  (`has_time_word`: "yesterday", "last week", a month, a date);
* `period_boost` — the query names a period ("in May 2023", "on 3 June, 2023") and the memory was written within
  it (its `time_created`): added by the op before the pool is cut (`retrieval/periods.py`), so it counts in
  the group scores too;
* `group_weight` — two-stage group → item search: candidates that share a group (in the op `metadata[group_key]`,
  e.g. the session a turn belongs to) are scored as a group first, and each candidate gets `group_weight` × its
  group's score over the best group's. `group_mode` says how a group is scored from its candidates' search
  scores: `sum` (many strong candidates make a strong group) or `max` (its best candidate).

`diversify` then picks the returned items in that order, but with `diversity` taken off a candidate's score per
candidate of its group already picked beyond the first `diversity_free`: a turn of a not yet covered session
can come before a further turn of a session already represented. A query that asks for several things
(`asks_for_list`: "What books has Melanie read?", "How many times ...", "... both ...") is diversified by
`list_diversity` instead: its answer is spread over several sessions more often than a single fact's.

Every bonus is off at 0. Which are on by default, and at what weights, was chosen by leave-one-conversation-out
cross-validation on LoCoMo dev (`cookbook/bench/locomo_cv.py`, docs/retrieval_quality.md).

Cost: the query's cues are read once per query; a candidate's own cues (its speaker, by `str.find`, and whether it
mentions time) once per distinct text (`text_cues`, a bounded LRU cache), so a candidate seen before costs a dict
lookup; the scores are numpy arrays.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from reme_service.retrieval.time_expressions import asks_about_time, has_time_word
from reme_service.stores.lexical import STOPWORDS

_NAME_RE = re.compile(r"\b[A-Z][\w'-]*\w\b")
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)?")
_QUOTED_RE = re.compile(r"\"([^\"]{2,})\"|“([^”]{2,})”|(?<!\w)'([^']{2,})'(?!\w)")
_POSSESSIVE_RE = re.compile(r"'s?$")
# questions whose answer is a list or a count: "both", "how many", "what are", "what books has/did ...", "what
# LGBTQ+ events has ...", "what has X done", "what kinds/types/ways" (English; chosen on LoCoMo dev: 169 of 760
# questions, 102 of them with several evidence sessions)
_LIST_RE = re.compile(
    r"\bboth\b|\bhow many\b|^\W*(?:what|which)\s+(?:are|were)\b"
    r"|^\W*(?:what|which)\s+(?:\S+\s+){0,2}\S{3,}s\s+(?:has|have|did|does|do|is|are)\b"
    r"|^\W*what\s+(?:\w+\s+){0,2}(?:has|have)\b|\bwhat\s+(?:kinds?|types?|sorts?|ways)\b",
    re.IGNORECASE,
)
SPEAKER_MAX = 40  # the longest speaker name a "<Name>: " line prefix may hold
TEXT_CACHE = 32_768  # candidate texts whose cues are kept (a few MB; a LoCoMo conversation has ~600 turns)


class Rescoring(BaseModel):
    """The bonus weights (0 = off). Op params embed it; the benches build it directly."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    speaker_boost: float = 0.0
    name_boost: float = 0.0
    phrase_boost: float = 0.0
    number_boost: float = 0.0
    time_boost: float = 0.0
    period_boost: float = Field(default=0.0, ge=0.0)
    group_weight: float = 0.0
    group_mode: Literal["sum", "max"] = "sum"
    diversity: float = Field(default=0.0, ge=0.0)
    diversity_free: int = Field(default=0, ge=0)
    list_diversity: float | None = Field(default=None, ge=0.0)  # for list questions; None: `diversity`

    @property
    def active(self) -> bool:
        """Whether any bonus (or the diversification) changes the search order."""
        weights = (self.speaker_boost, self.name_boost, self.phrase_boost, self.number_boost, self.time_boost)
        spread = (self.diversity, self.list_diversity or 0.0)
        return any(value > 0.0 for value in (*weights, self.period_boost, self.group_weight, *spread))

    def diversity_for(self, query: str) -> float:
        """The diversification penalty for `query`: `list_diversity` when it asks for a list, else `diversity`."""
        if self.list_diversity is not None and asks_for_list(query):
            return self.list_diversity
        return self.diversity


def asks_for_list(query: str) -> bool:
    """Whether a question asks for several things or a count ("What books has Melanie read?", "How many times
    ...?", "What do Jon and Gina both like?"): English rules."""
    if query.isascii():  # every form holds one of these words (ASCII text folds case only within ASCII)
        lower = query.lower()
        if "both" not in lower and "many" not in lower and "what" not in lower and "which" not in lower:
            return False
    return _LIST_RE.search(query) is not None


class QueryCues:
    """What `rescore` looks for, read from the query once."""

    __slots__ = ("names", "numbers", "phrases", "when")

    def __init__(self, query: str) -> None:
        names = {_POSSESSIVE_RE.sub("", word) for word in _NAME_RE.findall(query)}
        self.names = sorted(n for n in names if n.lower() not in STOPWORDS and len(n) > 1)
        self.numbers = frozenset(_NUMBER_RE.findall(query))
        quoted = '"' in query or "'" in query or "“" in query  # what every quoted phrase starts with
        found = _QUOTED_RE.finditer(query) if quoted else ()
        self.phrases = [next(g for g in m.groups() if g).strip().casefold() for m in found]
        self.when = asks_about_time(query)


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) is not None


def speaker_of(text: str) -> str | None:
    """The speaker of a `"<Name>: line"` text (1-40 characters before the colon, no line break, a space after it),
    or None."""
    body = text.lstrip()
    colon = body.find(":", 1, SPEAKER_MAX + 1)
    if colon < 1 or colon + 1 >= len(body) or not body[colon + 1].isspace():
        return None
    head = body[:colon]
    return None if "\n" in head else head.strip()


@lru_cache(maxsize=TEXT_CACHE)
def text_cues(text: str) -> tuple[str | None, bool]:
    """What the query-independent cues of a candidate text are: its speaker (`speaker_of`) and whether it mentions
    time (`has_time_word`). Read once per distinct text: the same memories are candidates again and again."""
    return speaker_of(text), has_time_word(text)


def cue_bonus(cues: QueryCues, text: str, weights: Rescoring) -> float:
    """The bonus `text` earns for the query's cues (group scores aside)."""
    return float(cue_bonuses(cues, [text], weights)[0])


def cue_bonuses(cues: QueryCues, texts: Sequence[str], weights: Rescoring) -> NDArray[np.float64]:
    """The bonus each text earns for the query's cues (group scores aside)."""
    bonus = np.zeros(len(texts))
    if not texts:
        return bonus
    cached = [text_cues(text) for text in texts] if (cues.names and weights.speaker_boost) or cues.when else []
    if cues.names and weights.speaker_boost:
        names = set(cues.names)
        bonus += weights.speaker_boost * np.fromiter((c[0] in names for c in cached), bool, len(texts))
    if cues.names and weights.name_boost:
        found = [sum(1 for name in cues.names if _has_word(text, name)) for text in texts]
        bonus += weights.name_boost * np.asarray(found, dtype=np.float64) / len(cues.names)
    if weights.phrase_boost and cues.phrases:
        hit = (any(phrase in text.casefold() for phrase in cues.phrases) for text in texts)
        bonus += weights.phrase_boost * np.fromiter(hit, bool, len(texts))
    if weights.number_boost and cues.numbers:
        hit = (bool(cues.numbers & set(_NUMBER_RE.findall(text))) for text in texts)
        bonus += weights.number_boost * np.fromiter(hit, bool, len(texts))
    if weights.time_boost and cues.when:
        bonus += weights.time_boost * np.fromiter((c[1] for c in cached), bool, len(texts))
    return bonus


def group_scores(groups: Sequence[str | None], scores: NDArray[np.float64], mode: str) -> NDArray[np.float64]:
    """Each candidate's group score over the best group's, in [0, 1] (0 for a candidate in no group): a group's
    score is the sum (`mode` "sum") or the best (`"max"`) of its candidates' scores (negative ones count as 0)."""
    if groups.count(None) == len(groups):  # no candidate in a group (memories without the group key)
        return np.zeros(len(groups))
    totals: dict[str, float] = {}
    add = mode == "sum"
    for group, score in zip(groups, scores.tolist(), strict=True):
        if group is not None:
            value = max(score, 0.0)
            old = totals.get(group, 0.0)
            totals[group] = old + value if add else max(old, value)
    top = max(totals.values(), default=0.0)
    if top <= 0.0:
        return np.zeros(len(groups))
    return np.array([0.0 if g is None else totals[g] / top for g in groups])


def rescore(
    query: str,
    texts: Sequence[str],
    scores: Sequence[float],
    weights: Rescoring,
    groups: Sequence[str | None] | None = None,
) -> NDArray[np.float64]:
    """The candidates' scores with their bonuses added (same order as `texts`)."""
    base = np.asarray(scores, dtype=np.float64)
    if not weights.active:
        return base.copy()
    out = base + cue_bonuses(QueryCues(query), texts, weights)
    if weights.group_weight and groups is not None:
        out += weights.group_weight * group_scores(groups, base, weights.group_mode)
    return out


def diversify(
    order: Sequence[int],
    groups: Sequence[str | None],
    scores: NDArray[np.float64],
    k: int,
    weights: Rescoring,
    penalty: float | None = None,
) -> list[int]:
    """The first `k` of `order` (items by score, best first), picked greedily: the next is the best by its score
    less `penalty` (default `weights.diversity`) per item of its group already picked beyond the first
    `diversity_free` (ties: earlier in `order`). Items in no group are never penalised. With no diversity, the first
    `k` of `order`.

    Within a group the penalty is the same for every item, so only each group's first item left can be next: a
    pick compares one item per group, not every item."""
    penalty = weights.diversity if penalty is None else penalty
    free = weights.diversity_free
    if penalty <= 0.0 or groups.count(None) == len(groups):  # nothing to penalise (no group at all)
        return list(order[:k])
    queues: dict[str | None, deque[tuple[int, int]]] = {}  # group -> (position in order, item), None: no group
    for position, item in enumerate(order):
        queues.setdefault(groups[item], deque()).append((position, item))
    counts: dict[str | None, int] = {}

    def head(group: str | None) -> tuple[float, int]:
        """The value of the group's first item left, and its position negated (earlier wins a tie)."""
        position, item = queues[group][0]
        cut = 0.0 if group is None else penalty * max(counts.get(group, 0) - free, 0)
        return float(scores[item]) - cut, -position

    picked: list[int] = []
    while queues and len(picked) < k:
        group = max(queues, key=head)
        queue = queues[group]
        picked.append(queue.popleft()[1])
        counts[group] = counts.get(group, 0) + 1
        if not queue:
            del queues[group]
    return picked
