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
