"""A BM25 index over the texts of one workspace, kept row-aligned with the store's matrix.

Used by the memory/local stores for hybrid retrieval: a query's cosine similarities are fused with its BM25
scores over the same texts (`fuse`). The index is keyed by **row**, like the store's matrix, so scoring yields a
dense array aligned with the cosine scores.

Tokens: lower-cased `\\w+` runs; runs of CJK characters become overlapping character bigrams (Chinese has no
spaces); a short English stopword list is dropped (it holds the "s" of a possessive "'s"), and a plural "s" is
removed (so "Caroline's paintings" matches "caroline" and "painting"); digits are kept. The index stems further
by default (`light_stem`: "painted", "painting" and "paints" are one term): on LoCoMo dev it lifts hit@1 by 0.02
under cross-validation (docs/retrieval_quality.md). `tokenize` itself stems only when asked: the pgvector store's
stored `lex` columns are made with plain `tokenize`, and stay so (rows written before would not match stemmed
queries).

Maintenance is incremental — `append` / `replace` / `remove` cost O(terms of the document) — and a delete that
moves the last row into the hole (the store's swap-delete) re-keys only the moved document's postings
(`remove`). Scoring touches only the postings of the query's terms (vectorised with numpy per term). Memory:
the postings only, 8 bytes each (texts are not copied).

A term in many rows (at least `DENSE_MIN_ROWS` and an eighth of them) costs a query a pass over that many postings
with gathers and a scatter (~60 µs for 10k); its scores are kept instead, one float per row, until the index next
changes, so a later query adds them in one pass (~5 µs). At most `DENSE_BYTES` of them per index (the first terms
asked for); any write drops them all (BM25 of every row depends on the number of rows and their mean length).

Not thread-safe by itself: the store mutates it under its exclusive gate and reads it under the shared gate.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from collections.abc import Iterable

import numpy as np
from numpy.typing import NDArray

K1 = 1.2
B = 0.75
DENSE_MIN_ROWS = 1_024  # a term in at least this many rows (and an eighth of them) keeps its scores (docstring)
DENSE_BYTES = 8 << 20  # of kept scores per index
# a term's cost beyond its postings' 4 bytes an int: its dict slot, its string and its array's header and spare room
# (measured with tracemalloc: ~190 bytes over 10k LoCoMo turns; `tests/unit/test_lexical_kept_scores.py`)
TERM_BYTES = 200

_WORD_RE = re.compile(r"\w+", re.UNICODE)
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
    now of off on once only or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves s t d ll m re ve"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _plural(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


_VOWELS = frozenset("aeiouy")


def light_stem(word: str) -> str:
    """A light English suffix stripper: plural "s"/"es"/"ies", "ing", "ed", then a final "e", so "paint",
    "paints", "painted" and "painting" meet, as do "love", "loved" and "loving". Short words and words without a
    vowel left are kept; digits are never touched."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "shes", "ches", "xes", "zes")):
        word = word[:-2]
    else:
        word = _plural(word)
    for suffix in ("ing", "ed"):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) >= 3 and _VOWELS & set(stem):
            if stem.endswith("i") and suffix == "ed":
                stem = stem[:-1] + "y"
            elif len(stem) > 3 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                stem = stem[:-1]  # running -> run, stopped -> stop
            word = stem
            break
    if len(word) > 3 and word.endswith("e") and not word.endswith("ee"):
        word = word[:-1]
    return word


def tokenize(text: str, *, stem: bool = False) -> list[str]:
    """The index terms of `text` (see the module docstring); with `stem`, words go through `light_stem`
    instead of losing only a plural "s"."""
    normalise = light_stem if stem else _plural
    tokens: list[str] = []
    for match in _WORD_RE.finditer(text.lower()):
        word = match.group()
        if _CJK_RE.search(word):
            for part in _CJK_RE.split(word):  # latin/digit pieces glued to CJK text
                if part and part not in STOPWORDS:
                    tokens.append(normalise(part))
            for run in _CJK_RE.findall(word):
                tokens.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
        elif word not in STOPWORDS:
            tokens.append(normalise(word))
    return tokens


class LexicalIndex:
    """BM25 postings by row. `size` rows exist (0..size-1), as in the store's matrix.

    A term's postings are one `array('i')` of interleaved `(row, term frequency)` pairs, in no particular order:
    8 bytes a posting and one object a term (a dict of row -> frequency per term took ~37 MiB for 100k short
    texts; this takes a few). Removing a posting finds its pair with one vectorised scan of the term's array and
    moves the term's last pair into its place. Scoring copies a query term's pairs into numpy (a memcpy).

    The index keeps no copy of the texts: the store holds them, and passes the old text of a row it replaces or
    deletes (re-tokenising it is cheaper than keeping every document's terms in RAM).
    """

    __slots__ = ("_dense", "_ints", "_lengths", "_postings", "_size", "_stem", "_total")

    def __init__(self, *, stem: bool = True) -> None:
        self._stem = stem  # tokenize(..., stem=) of documents and queries alike
        self._size = 0
        self._lengths: NDArray[np.float32] = np.zeros(64, np.float32)  # row -> document length
        self._postings: dict[str, array[int]] = {}  # term -> (row, tf) pairs, interleaved
        self._total = 0  # sum of document lengths
        self._dense: dict[str, NDArray[np.float32]] = {}  # term -> its score of every row, while nothing changes
        self._ints = 0  # ints in all postings (two a posting)

    @classmethod
    def build(cls, texts: Iterable[str], *, stem: bool = True) -> LexicalIndex:
        index = cls(stem=stem)
        for text in texts:
            index.append(text)
        return index

    @property
    def size(self) -> int:
        return self._size

    @property
    def kept_terms(self) -> int:
        """How many terms keep their scores now (module docstring)."""
        return len(self._dense)

    def nbytes(self) -> int:
        """Estimated bytes the index holds: its postings, a `TERM_BYTES` a term, the row lengths and the kept
        scores. O(1): the postings are counted as they change."""
        dense = self._dense
        kept = sum(int(scores.nbytes) for scores in list(dense.values()))
        return 4 * self._ints + TERM_BYTES * len(self._postings) + int(self._lengths.nbytes) + kept

    def _index(self, row: int, text: str) -> None:
        self._dense = {}
        counts = Counter(tokenize(text, stem=self._stem))
        postings = self._postings
        for term, tf in counts.items():
            pairs = postings.get(term)
            if pairs is None:
                postings[term] = array("i", (row, tf))
            else:
                pairs.append(row)
                pairs.append(tf)
        self._ints += 2 * len(counts)
        length = sum(counts.values())
        if row >= len(self._lengths):
            grown = np.zeros(max(row + 1, len(self._lengths) * 3 // 2), np.float32)
            grown[: len(self._lengths)] = self._lengths
            self._lengths = grown
        self._lengths[row] = length
        self._total += length

    def _unindex(self, row: int, text: str) -> None:
        self._dense = {}
        postings = self._postings
        for term in set(tokenize(text, stem=self._stem)):
            pairs = postings[term]
            at = _pair_of(pairs, row)
            pairs[at : at + 2] = pairs[-2:]
            del pairs[-2:]
            self._ints -= 2
            if not pairs:
                del postings[term]
        self._total -= int(self._lengths[row])
        self._lengths[row] = 0

    def append(self, text: str) -> None:
        """Index `text` as a new last row."""
        self._index(self._size, text)
        self._size += 1

    def replace(self, row: int, old_text: str, new_text: str) -> None:
        """Index `new_text` at an existing `row` that held `old_text`."""
        self._unindex(row, old_text)
        self._index(row, new_text)

    def remove(self, row: int, text: str, last_text: str) -> None:
        """Delete `row` (holding `text`) the way the store does: the last row (holding `last_text`) moves into
        its place, and only its postings are re-keyed."""
        last = self._size - 1
        self._unindex(row, text)
        if row != last:
            postings = self._postings
            for term in set(tokenize(last_text, stem=self._stem)):
                pairs = postings[term]
                pairs[_pair_of(pairs, last)] = row
            self._lengths[row] = self._lengths[last]
            self._lengths[last] = 0
        self._size = last

    def scores(self, query: str) -> NDArray[np.float32]:
        """BM25 score of every row for `query` (zeros when no term matches). Runs under the store's shared gate,
        possibly in several threads at once: kept scores (module docstring) are stored once complete, and the
        mutators, which drop them, run alone."""
        n = self._size
        out = np.zeros(n, np.float32)
        if n == 0:
            return out
        dense = self._dense
        for term in set(tokenize(query, stem=self._stem)):
            kept = dense.get(term)
            if kept is not None:
                out += kept
                continue
            postings = self._postings.get(term)
            if not postings:
                continue
            df = len(postings) // 2
            if df >= DENSE_MIN_ROWS and df * 8 >= n and (len(dense) + 1) * n * 4 <= DENSE_BYTES:
                kept = np.zeros(n, np.float32)
                self._add_term(kept, postings)
                dense[term] = kept  # (whole: another thread may read it from now on)
                out += kept
            else:
                self._add_term(out, postings)
        return out

    def _add_term(self, out: NDArray[np.float32], postings: array[int]) -> None:
        """Add one term's BM25 score of each row it is in to `out`."""
        n = self._size
        pairs = np.array(postings, dtype=np.int32).reshape(-1, 2)  # a copy: no view pins the array's buffer
        rows, tf = pairs[:, 0], pairs[:, 1].astype(np.float32)
        df = len(rows)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        norm = K1 * (1.0 - B + B * self._lengths[rows] / max(self._total / n, 1e-6))
        out[rows] += np.float32(idf) * tf * (K1 + 1.0) / (tf + norm)


def _pair_of(pairs: array[int], row: int) -> int:
    """The index in `pairs` of `row`'s pair (its row entry). The numpy view is gone before `pairs` can change."""
    found = np.flatnonzero(np.frombuffer(pairs, dtype=np.int32)[0::2] == row)
    if not len(found):
        raise KeyError(row)
    return 2 * int(found[0])


def fuse(
    cosine: NDArray[np.float32], lexical: NDArray[np.float32], weight: float, top: float | None = None
) -> NDArray[np.float32]:
    """`(1 - weight) * cosine + weight * lexical / top`: a score in [0, 1] when cosine is. `top` is the best lexical
    score of the workspace (default: of `lexical`), given when `lexical` holds some rows only."""
    if top is None:
        top = float(lexical.max()) if len(lexical) else 0.0
    if weight <= 0.0 or top <= 0.0:
        return cosine
    return (1.0 - weight) * np.clip(cosine, 0.0, 1.0) + (weight / top) * lexical
