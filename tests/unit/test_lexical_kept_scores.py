"""BM25 scores kept for terms in many rows (`stores/lexical.py`): a query gets the same scores as from the postings,
and any change to the index (a new row, a replaced one, a delete) drops what was kept."""

from __future__ import annotations

import numpy as np
import pytest

from reme_service.stores import lexical
from reme_service.stores.lexical import DENSE_MIN_ROWS, LexicalIndex

ROWS = 4 * DENSE_MIN_ROWS


def texts(count: int) -> list[str]:
    """Every row says "common"; a third say "alpha"; "rare <i>" is one row's own."""
    return [f"common note {'alpha ' if i % 3 == 0 else ''}rare{i}" for i in range(count)]


def fresh_scores(documents: list[str], query: str) -> np.ndarray:
    return LexicalIndex.build(documents).scores(query)


def test_kept_scores_equal_the_postings_scores() -> None:
    documents = texts(ROWS)
    index = LexicalIndex.build(documents)
    first = index.scores("common alpha rare7")
    assert set(index._dense) == {"common", "alpha"}  # in every row, in a third: kept; "rare7": one row
    again = index.scores("common alpha rare7")
    np.testing.assert_array_equal(first, again)
    truth = np.zeros(ROWS, np.float32)
    for term in ("common", "alpha", "rare7"):
        index._add_term(truth, index._postings[term])
    np.testing.assert_allclose(again, truth, rtol=1e-6)


def test_every_change_drops_the_kept_scores() -> None:
    documents = texts(ROWS)
    index = LexicalIndex.build(documents)
    query = "common alpha"
    index.scores(query)

    index.append("common words only")  # one more row: every score's document count and mean length change
    documents.append("common words only")
    np.testing.assert_allclose(index.scores(query), fresh_scores(documents, query), rtol=1e-6)

    index.replace(5, documents[5], "alpha alpha alpha")
    documents[5] = "alpha alpha alpha"
    np.testing.assert_allclose(index.scores(query), fresh_scores(documents, query), rtol=1e-6)

    index.remove(0, documents[0], documents[-1])  # the store's swap-delete: the last row moves into row 0
    documents[0] = documents.pop()
    np.testing.assert_allclose(index.scores(query), fresh_scores(documents, query), rtol=1e-6)


def test_kept_scores_stay_within_their_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical, "DENSE_BYTES", ROWS * 4)  # room for one term's scores
    index = LexicalIndex.build(texts(ROWS))
    scores = index.scores("common alpha")
    assert len(index._dense) == 1
    np.testing.assert_allclose(scores, fresh_scores(texts(ROWS), "common alpha"), rtol=1e-6)


def test_the_size_estimate_follows_the_postings_and_the_kept_scores() -> None:
    """`nbytes` is close to what the index holds (tracemalloc), follows deletes and replacements as a fresh build of
    the same texts (the postings are counted as they change), and counts kept scores while they are kept."""
    import tracemalloc

    documents = [f"note {i} of topic{i % 300} and word{i % 37} in set{i % 3}" for i in range(ROWS)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        index = LexicalIndex.build(documents)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 0.75 * held <= index.nbytes() <= 1.25 * held, (index.nbytes(), held)

    kept_before = index.nbytes()
    index.scores("note set1")  # "note" in every row, "set1" in a third: both kept
    assert index.kept_terms == 2 and index.nbytes() == kept_before + 2 * 4 * ROWS

    rows = list(documents)
    for row in range(ROWS - 1, ROWS // 2, -1):  # delete half the rows (from the end: no row moves) ...
        index.remove(row, rows[row], rows[row])
        rows.pop()
    for row in range(0, len(rows), 7):  # ... and replace some with shorter texts
        index.replace(row, rows[row], f"short {row}")
        rows[row] = f"short {row}"
    assert index.kept_terms == 0  # the writes dropped them
    rebuilt = LexicalIndex.build(rows)
    assert abs(index.nbytes() - rebuilt.nbytes()) <= 4 * ROWS  # only the row-length arrays' spare room may differ
