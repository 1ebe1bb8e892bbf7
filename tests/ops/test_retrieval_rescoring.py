"""Retrieval quality, second step: the stemmed BM25 terms, the query-cue bonuses and the recall op applying them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reme_service.app import ReMeApp
from reme_service.retrieval.periods import period_filter, query_periods, written_in
from reme_service.retrieval.rescore import (
    QueryCues,
    Rescoring,
    asks_for_list,
    cue_bonus,
    diversify,
    rescore,
    speaker_of,
)
from reme_service.stores.lexical import LexicalIndex, light_stem, tokenize

pytestmark = pytest.mark.anyio


def test_light_stem_joins_inflections_and_leaves_short_words_and_numbers() -> None:
    assert {light_stem(w) for w in ("paint", "paints", "painted", "painting")} == {"paint"}
    assert {light_stem(w) for w in ("love", "loved", "loving", "loves")} == {"lov"}
    assert {light_stem(w) for w in ("run", "running")} == {"run"}
    assert {light_stem(w) for w in ("study", "studies", "studied")} == {"study"}
    assert light_stem("class") == "class" and light_stem("watches") == "watch"
    assert light_stem("sing") == "sing" and light_stem("bed") == "bed"  # no stem left: kept
    assert light_stem("2023") == "2023" and light_stem("cat") == "cat"
    assert tokenize("She painted it") == ["painted"]  # plain tokenize does not stem: pgvector's lex column
    assert tokenize("She painted it", stem=True) == ["paint"]


def test_the_index_stems_by_default_and_can_be_told_not_to() -> None:
    texts = ["Melanie: I painted a sunset", "Caroline: the painting class was fun"]
    assert (LexicalIndex.build(texts).scores("paintings") > 0).all()
    plain = LexicalIndex.build(texts, stem=False).scores("paintings")
    assert plain[0] == 0 and plain[1] > 0


def test_query_cues() -> None:
    cues = QueryCues('When did Caroline\'s friend Jon say "open mind" in 2022?')
    assert cues.names == ["Caroline", "Jon"] and cues.numbers == {"2022"} and cues.phrases == ["open mind"]
    assert cues.when
    assert QueryCues("What does Melanie paint?").names == ["Melanie"]  # "What" is a stopword, not a name
    assert not QueryCues("what does melanie paint").names


def test_each_cue_earns_its_bonus_only_when_matched() -> None:
    cues = QueryCues('When did Caroline say "open mind" in 2022?')
    one = 0.1

    def bonus(text: str, **weights: float) -> float:
        return round(cue_bonus(cues, text, Rescoring.model_validate(weights)), 6)

    assert bonus("Caroline: I went there", speaker_boost=one) == one
    assert bonus("Melanie: Caroline went there", speaker_boost=one) == 0  # named, not speaking
    assert bonus("Melanie: Caroline went there", name_boost=one) == one  # 1 of 1 name found
    assert bonus("Melanie: Carolines went", name_boost=one) == 0  # a whole word only
    assert bonus("Keep an Open Mind", phrase_boost=one) == one
    assert bonus("keep an open heart", phrase_boost=one) == 0
    assert bonus("in 2022 we moved", number_boost=one) == one and bonus("in 20220", number_boost=one) == 0
    assert bonus("we moved last week", time_boost=one) == one and bonus("we moved", time_boost=one) == 0
    assert bonus("Caroline: in 2022, last week", speaker_boost=one, number_boost=one, time_boost=one) == 0.3
    assert cue_bonus(QueryCues("What did Caroline say?"), "we moved last week", Rescoring(time_boost=1)) == 0


def test_the_speaker_is_read_off_the_line_prefix() -> None:
    assert speaker_of("Caroline: I went there") == "Caroline"
    assert speaker_of("  Jon Smith : hi") == "Jon Smith"
    assert speaker_of("Caroline:hi") is None and speaker_of("Caroline:") is None  # a space must follow
    assert speaker_of("a\nb: c") is None and speaker_of(": x") is None
    assert speaker_of("x" * 40 + ": y") == "x" * 40 and speaker_of("x" * 41 + ": y") is None
    assert speaker_of("Note: a: b") == "Note"


def test_rescore_adds_group_scores_and_is_the_identity_when_off() -> None:
    texts = ["a", "b", "c", "d"]
    scores = [0.5, 0.4, 0.3, 0.3]
    assert rescore("q", texts, scores, Rescoring()).tolist() == scores
    groups = ["s1", "s2", "s2", None]
    out = rescore("q", texts, scores, Rescoring(group_weight=0.2), groups)
    # s2 sums 0.7 (the best group), s1 0.5: d, in no group, gets nothing
    assert out.tolist() == pytest.approx([0.5 + 0.2 * 0.5 / 0.7, 0.4 + 0.2, 0.3 + 0.2, 0.3])
    # by its best candidate, s1 (0.5) is the best group and s2 (0.4) scores 0.8 of it
    out = rescore("q", texts, scores, Rescoring(group_weight=0.2, group_mode="max"), groups)
    assert out.tolist() == pytest.approx([0.5 + 0.2, 0.4 + 0.2 * 0.8, 0.3 + 0.2 * 0.8, 0.3])


def test_diversify_puts_an_uncovered_group_before_a_further_item_of_a_covered_one() -> None:
    scores = np.array([0.9, 0.85, 0.8, 0.7, 0.6])
    groups = ["s1", "s1", "s1", "s2", None]
    order = [0, 1, 2, 3, 4]
    assert diversify(order, groups, scores, 3, Rescoring()) == [0, 1, 2]  # off: the order itself
    # 0.1 per item of the group already picked: s1's second (0.75) still beats s2 (0.7), its third (0.6) does not
    assert diversify(order, groups, scores, 4, Rescoring(diversity=0.1)) == [0, 1, 3, 2]
    # items in no group are never penalised; with one free item per group the second s1 item goes unpenalised
    assert diversify(order, groups, scores, 5, Rescoring(diversity=1.0)) == [0, 3, 4, 1, 2]
    assert diversify(order, groups, scores, 3, Rescoring(diversity=0.3, diversity_free=1)) == [0, 1, 3]


def test_list_questions_are_diversified_by_their_own_penalty() -> None:
    for question in (
        "What books has Melanie read?",
        "What activities does Melanie partake in?",
        "How many times has Melanie gone to the beach in 2023?",
        "What do Jon and Gina both have in common?",
        "What are Melanie's pets' names?",
        "What has Melanie painted?",
        "What LGBTQ+ events has Caroline participated in?",  # a plural noun after a word with punctuation
        "What types of pottery have Melanie and her kids made?",
        "What kind of art does Caroline make?",
        "In what ways is Caroline participating in the LGBTQ community?",
    ):
        assert asks_for_list(question), question
    for question in ("What did Caroline research?", "When did Melanie paint a sunrise?", "Where is Jon's studio?"):
        assert not asks_for_list(question), question
    weights = Rescoring(diversity=0.1, list_diversity=1.0)
    assert weights.diversity_for("What books has Melanie read?") == 1.0
    assert weights.diversity_for("What did Caroline research?") == 0.1
    assert Rescoring(diversity=0.1).diversity_for("What books has Melanie read?") == 0.1  # None: `diversity`
    scores = np.array([0.9, 0.85, 0.7])
    groups = ["s1", "s1", "s2"]
    assert diversify([0, 1, 2], groups, scores, 2, Rescoring(diversity=0.1)) == [0, 1]
    assert diversify([0, 1, 2], groups, scores, 2, Rescoring(diversity=0.1), penalty=1.0) == [0, 2]


def test_the_periods_a_query_names_are_time_created_bounds() -> None:
    moment = datetime(2024, 1, 10, 12, 0)
    july = ("2023-07-01 00:00:00", "2023-08-01 00:00:00")
    assert query_periods("What did Mel and her kids paint in July 2023?", moment) == [july]
    assert query_periods("What did Mel and her kids paint?", moment) == []
    assert query_periods("What did Jon do last year?", moment) == [("2023-01-01 00:00:00", "2024-01-01 00:00:00")]
    assert len(query_periods("Where was John between August 11 and August 15 2023, or on May 3, 2023?", moment)) == 2
    assert written_in("2023-07-15 13:56:00", [july]) and written_in("2023-07-01 00:00:00", [july])
    assert not written_in("2023-08-01 00:00:00", [july]) and not written_in(None, [july])
    flt = period_filter(july, {"metadata.memory_type": "task"})
    assert flt == {"metadata.memory_type": "task", "metadata.time_created": {"gte": july[0], "lt": july[1]}}


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[ReMeApp]:
    overlay = tmp_path / "plain.yaml"
    overlay.write_text(
        "flow:\n  retrieve_unscored:\n    flow_content: BuildQueryOp() >> RecallVectorStoreOp(speaker_boost=0, "
        "time_boost=0, period_boost=0, group_weight=0, diversity=0, list_diversity=None) "
        ">> RerankMemoryOp(enable_llm_rerank=False)\n"
        "    input_schema:\n      query: {type: string, required: true}\n      top_k: {type: integer, default: 3}\n"
        "  retrieve_grouped:\n    flow_content: BuildQueryOp() >> RecallVectorStoreOp(speaker_boost=0, "
        "time_boost=0, group_weight=1.0, group_mode='sum', diversity=0) >> RerankMemoryOp(enable_llm_rerank=False)\n"
        "    input_schema:\n      query: {type: string, required: true}\n      top_k: {type: integer, default: 3}\n"
        "  retrieve_listing:\n    flow_content: BuildQueryOp() >> RecallVectorStoreOp(speaker_boost=0, "
        "time_boost=0, period_boost=0, group_weight=0, diversity=0, list_diversity=1.0) "
        ">> RerankMemoryOp(enable_llm_rerank=False)\n"
        "    input_schema:\n      query: {type: string, required: true}\n      top_k: {type: integer, default: 3}\n"
        "  retrieve_diverse:\n    flow_content: BuildQueryOp() >> RecallVectorStoreOp(speaker_boost=0, "
        "time_boost=0, group_weight=0, diversity=1.0) >> RerankMemoryOp(enable_llm_rerank=False)\n"
        "    input_schema:\n      query: {type: string, required: true}\n      top_k: {type: integer, default: 3}\n"
    )
    async with ReMeApp(
        f"config={overlay}", f"data_dir={tmp_path}", "embedding_model.default.backend=hash", env={}
    ) as application:
        yield application


async def insert(app: ReMeApp, dicts: list[dict[str, Any]]) -> None:
    result = await app.async_execute(name="vector_store", workspace_id="ws", action="insert", memory_dicts=dicts)
    assert result["success"] is True, result


def turn(speaker: str, text: str, session: str) -> dict[str, Any]:
    line = f"{speaker}: {text}"
    return {"when_to_use": line, "content": line, "metadata": {"session": session}}


async def first(app: ReMeApp, flow: str, query: str) -> list[str]:
    result = await app.async_execute(name=flow, workspace_id="ws", query=query, top_k=2)
    assert result["success"] is True, result
    return [m["content"] for m in result["metadata"]["memory_list"]]


async def test_the_recall_op_lifts_the_named_speakers_line(app: ReMeApp) -> None:
    await insert(
        app,
        [
            turn("Melanie", "Caroline went hiking with the dog in the hills", "D1"),
            turn("Caroline", "I went hiking with the dog", "D2"),
            *[turn("Melanie", f"filler line number {i}", "D3") for i in range(20)],
        ],
    )
    query = "Where did Caroline go hiking with the dog in the hills?"
    assert (await first(app, "retrieve_unscored", query))[0].startswith("Melanie:")
    top = await first(app, "retrieve_task_memory", query)
    assert top[0] == "Caroline: I went hiking with the dog"
    result = await app.async_execute(name="retrieve_task_memory", workspace_id="ws", query=query, top_k=2)
    assert all(0 < m["relevance"] <= 1 for m in result["metadata"]["memory_list"])  # the search score, no bonus


async def test_the_recall_op_lifts_time_mentions_for_when_questions(app: ReMeApp) -> None:
    await insert(
        app,
        [
            turn("Jon", "the bakery on the corner opened", "D1"),
            turn("Jon", "the bakery on the corner opened yesterday", "D1"),
        ],
    )
    query = "When was the bakery on the corner opened?"
    assert (await first(app, "retrieve_unscored", query))[0] == "Jon: the bakery on the corner opened"
    assert (await first(app, "retrieve_task_memory", query))[0] == "Jon: the bakery on the corner opened yesterday"
    # not a "when" question: no time bonus
    assert (await first(app, "retrieve_task_memory", "the bakery on the corner opened"))[0].endswith("opened")


async def test_the_recall_op_groups_candidates_by_their_session(app: ReMeApp) -> None:
    await insert(
        app,
        [
            turn("Ann", "apple pie recipe with cinnamon", "D2"),
            turn("Ann", "apple pie recipe", "D1"),
            turn("Ann", "apple pie with cinnamon", "D1"),
            turn("Ann", "recipe with cinnamon", "D1"),
            *[{"when_to_use": f"filler line number {i}", "content": f"filler {i}"} for i in range(20)],  # no session
        ],
    )
    query = "apple pie recipe with cinnamon"
    assert (await first(app, "retrieve_unscored", query))[0] == "Ann: apple pie recipe with cinnamon"
    # D1's three candidates together outscore D2's one: the session stage lifts them above it
    grouped = await first(app, "retrieve_grouped", query)
    assert grouped == ["Ann: apple pie with cinnamon", "Ann: apple pie recipe"]


async def test_the_recall_op_diversifies_the_returned_sessions(app: ReMeApp) -> None:
    await insert(
        app,
        [
            turn("Ann", "apple pie recipe with cinnamon", "D1"),
            turn("Ann", "apple pie recipe with cinnamon and sugar", "D1"),
            # the first one's content again (case and spacing aside), found by a weaker text: dropped as a repeat
            {
                "when_to_use": "apple pie",
                "content": "Ann:  apple pie RECIPE with cinnamon",
                "metadata": {"session": "D3"},
            },
            turn("Ann", "an apple pie", "D2"),
            *[{"when_to_use": f"filler line number {i}", "content": f"filler {i}"} for i in range(20)],
        ],
    )
    query = "apple pie recipe with cinnamon"
    assert await first(app, "retrieve_unscored", query) == [
        "Ann: apple pie recipe with cinnamon",
        "Ann: apple pie recipe with cinnamon and sugar",
    ]
    # a second D1 turn is penalised by a whole score: D2's weaker turn comes second
    assert await first(app, "retrieve_diverse", query) == ["Ann: apple pie recipe with cinnamon", "Ann: an apple pie"]


async def test_the_recall_op_lifts_the_memories_written_in_the_period_the_query_names(app: ReMeApp) -> None:
    def written(text: str, session: str, when: str) -> dict[str, Any]:
        return {**turn("Ann", text, session), "time_created": when, "time_modified": when}

    await insert(
        app,
        [
            written("we made a rye loaf, the kids loved it", "D9", "2023-07-14 10:00:00"),
            *[
                written(f"the kids had a day out, number {i}", f"D{i % 5}", f"2023-0{1 + i % 5}-02 09:00")
                for i in range(30)
            ],
        ],
    )
    query = "What did Ann bake with the kids in July 2023?"
    result = await app.async_execute(name="retrieve_unscored", workspace_id="ws", query=query, top_k=20)
    plain = [m["content"] for m in result["metadata"]["memory_list"]]
    assert "Ann: we made a rye loaf, the kids loved it" not in plain  # beyond the pool the first search fills
    # the period's own search brings it in, and its bonus puts it first
    assert (await first(app, "retrieve_task_memory", query))[0] == "Ann: we made a rye loaf, the kids loved it"
    assert "rye" not in (await first(app, "retrieve_task_memory", "What did Ann bake with the kids in May 2023?"))[0]


async def test_the_recall_op_spreads_a_list_question_over_sessions(app: ReMeApp) -> None:
    await insert(
        app,
        [
            turn("Ann", "I read the book Dune by Frank Herbert", "D1"),
            turn("Ann", "I read the book Emma by Jane Austen", "D1"),
            turn("Ann", "my sister lent me a novel", "D2"),
            *[{"when_to_use": f"filler line number {i}", "content": f"filler {i}"} for i in range(10)],
        ],
    )
    one = await first(app, "retrieve_listing", "Which book did Ann read?")
    assert {text.split(" by ")[0] for text in one} == {"Ann: I read the book Dune", "Ann: I read the book Emma"}
    listed = await first(app, "retrieve_listing", "What books has Ann read?")
    assert listed[1] == "Ann: my sister lent me a novel"  # D2 before D1's second turn
