"""The personal prompts' reply parsers and the deterministic information score."""

from __future__ import annotations

import pytest

from reme_service.ops.personal.line_format import (
    parse_judgments,
    parse_observations,
    parse_rankings,
    parse_scores,
    parse_subjects,
    parse_time,
    parse_value,
)
from reme_service.ops.personal.rules import info_score, keywords, observation_text, token_overlap


def test_scores_need_every_item() -> None:
    reply = "Thinking about it...\nResult: 1 | 0\n**Result:** 2 | 3\n- Result: 3 | 2 (clear)"
    assert parse_scores(reply, 3) == {1: 0, 2: 3, 3: 2}
    assert parse_scores("Result: 1 | 3", 2) is None  # item 2 unscored: re-ask
    assert parse_scores("结果：1 | 3\n结果：2 | 1", 2) == {1: 3, 2: 1}
    assert parse_scores("Result: 1 | 7\nResult: 2 | 3", 2) is None
    assert parse_scores("Result: 5 | 3\nResult: 1 | 3", 1) == {1: 3}


def test_observations_need_a_line_per_message_and_none_lines_count() -> None:
    reply = (
        "Information: 1 | Alice likes tea | tea, drinks\n"
        "Information: 1 | Alice dislikes coffee | coffee\n"
        "Information: 2 | None | None"
    )
    found = parse_observations(reply, 2, with_time=False)
    assert found is not None
    assert [(o.index, o.content, o.keywords) for o in found] == [
        (1, "Alice likes tea", ["tea", "drinks"]),
        (1, "Alice dislikes coffee", ["coffee"]),
    ]
    assert parse_observations("Information: 1 | Alice likes tea | tea", 2, with_time=False) is None
    assert parse_observations("Alice likes tea.", 1, with_time=False) is None
    timed = parse_observations("信息：1 | 2023-05-07 | 小明去看了牙医 | 牙医、医院", 1, with_time=True)
    assert timed is not None and timed[0].time_text == "2023-05-07" and timed[0].keywords == ["牙医", "医院"]
    untimed = parse_observations("Information: 1 | none | Alice is a nurse | job", 1, with_time=True)
    assert untimed is not None and untimed[0].time_text == ""


def test_judgments_in_both_languages_with_corrections() -> None:
    judged = parse_judgments("Judgment: 1 | None\nJudgment: 2 | Contained\n判断：3 | 矛盾", 3)
    assert judged is not None
    assert {i: j.verdict for i, j in judged.items()} == {1: "none", 2: "contained", 3: "contradiction"}
    corrected = parse_judgments("Judgment: 2 | Contradiction | Alice used to teach", 2, with_correction=True)
    assert corrected is not None and corrected[2].corrected == "Alice used to teach"
    assert parse_judgments("Judgment: 2 | Maybe", 2) is None
    assert parse_judgments("No contradictions here.", 2) is None


def test_subjects_values_times_and_rankings() -> None:
    assert parse_subjects("Subject: work\nSubject: food preferences.") == ["work", "food preferences"]
    assert parse_subjects("Subject: None") == []
    assert parse_subjects("work, food") is None
    assert parse_value("Value: Alice is a head nurse") == "Alice is a head nurse"
    assert parse_value("取值：None") == ""
    assert parse_value("Alice is a head nurse") is None
    assert parse_time("Time: 2023-05-01..2023-05-07") == "2023-05-01..2023-05-07"
    assert parse_time("时间：none") == ""
    assert parse_time("last week") is None
    assert parse_rankings("Score: 1 | 0.9\nScore: 2 | 1.5\nScore: 3 | .2", 3) == {1: 0.9, 3: 0.2}
    assert parse_rankings("nothing", 3) is None


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ("Please remember that my son is allergic to peanuts.", 3),
        ("I love hiking in the mountains.", 3),
        ("My wife works at the hospital.", 3),
        ("We went camping at the lake with the kids.", 2),
        ("我喜欢喝绿茶。", 3),
        ("我昨天去看了牙医。", 2),
        ("Imagine I were a dragon guarding gold.", 1),
        ("Me too!", 1),
        ("That sounds like a wonderful way to spend a long summer weekend.", 1),
        ("Hi! How are you?", 0),
        ("What do you think about it?", 0),
    ],
)
def test_information_scores(text: str, score: int) -> None:
    assert info_score(text) == score


def test_observation_text_keywords_and_overlap() -> None:
    assert observation_text("I went hiking yesterday. Have you been? It was great!") == (
        "I went hiking yesterday. It was great!"
    )
    assert keywords("I love hiking. Hiking with my dog Max is the best hiking.") == [
        "hiking",
        "love",
        "dog",
        "max",
        "best",
    ]
    assert token_overlap("food preferences", "Alice prefers Thai food") == 0.5
    assert token_overlap("hobbies", "nothing related") == 0.0
