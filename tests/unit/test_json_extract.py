"""Tolerant JSON extraction from LLM replies."""

from __future__ import annotations

import pytest

from reme_service.providers.llm.json_extract import extract_json, extract_json_list, extract_json_object


def test_plain_json_object_and_list() -> None:
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json("  [1, 2, 3]\n") == [1, 2, 3]


def test_json_fence_wins_over_other_fences_and_prose() -> None:
    text = 'First {"x": 0}.\n```python\n[9]\n```\nThen:\n```json\n{"answer": 42}\n```\nbye'
    assert extract_json(text) == {"answer": 42}


def test_json_fence_tag_is_case_insensitive_and_may_share_the_line() -> None:
    assert extract_json('```JSON\n{"a": true}\n```') == {"a": True}
    assert extract_json('```json {"a": 2}```') == {"a": 2}


def test_untagged_fence() -> None:
    assert extract_json('Here you go:\n```\n[{"k": "v"}]\n```') == [{"k": "v"}]


def test_unclosed_fence_from_a_truncated_reply() -> None:
    assert extract_json('```json\n{"a": [1, 2]}\n') == {"a": [1, 2]}


def test_broken_json_fence_falls_back_to_later_candidates() -> None:
    text = '```json\n{"a": \n```\nActually: {"b": 2}'
    assert extract_json(text) == {"b": 2}


def test_prose_around_json() -> None:
    text = 'Sure! Based on the conversation, the result is {"memories": ["likes tea"], "count": 1}. Hope it helps.'
    assert extract_json(text) == {"memories": ["likes tea"], "count": 1}


def test_brackets_and_quotes_inside_strings() -> None:
    text = 'Result: {"text": "a } tricky ] string with \\"quotes\\" and { braces [", "n": [1, {"m": "]"}]} done'
    assert extract_json(text) == {"text": 'a } tricky ] string with "quotes" and { braces [', "n": [1, {"m": "]"}]}


def test_nested_structures_return_the_outermost() -> None:
    text = 'x {"outer": {"inner": [1, [2, 3]]}} y'
    assert extract_json(text) == {"outer": {"inner": [1, [2, 3]]}}


def test_unparsable_bracket_group_is_skipped() -> None:
    assert extract_json("see [note 1] and then [1, 2]") == [1, 2]


def test_trailing_commas_and_raw_newlines_are_tolerated() -> None:
    assert extract_json('{"a": [1, 2,], "b": "line1\nline2",}') == {"a": [1, 2], "b": "line1\nline2"}


def test_commas_inside_strings_are_kept() -> None:
    assert extract_json('{"a": "x,}", "b": 1,}') == {"a": "x,}", "b": 1}


@pytest.mark.parametrize(
    "text",
    ["", "   ", "no json here", "[unclosed", "['a', 'b'", "{", "``` ```", "}{][", "```json\n```", "[true, null"],
)
def test_garbage_gives_none(text: str) -> None:
    assert extract_json(text) is None
    assert extract_json_object(text) is None
    assert extract_json_list(text) is None


def test_chinese_text() -> None:
    text = (
        '好的，以下是提取的记忆：\n```json\n[{"content": "用户喜欢喝绿茶【每天】", "when": "早上"}]\n```\n希望有帮助！'
    )
    assert extract_json(text) == [{"content": "用户喜欢喝绿茶【每天】", "when": "早上"}]
    inline = '结果如下：{"决定": "使用 {大括号} 的字符串", "分数": 0.9}。'
    assert extract_json_object(inline) == {"决定": "使用 {大括号} 的字符串", "分数": 0.9}


def test_scalars_only_from_the_whole_text() -> None:
    assert extract_json("42") == 42
    assert extract_json('"quoted"') == "quoted"
    assert extract_json("the answer is 42") is None


def test_extract_json_object_skips_non_objects() -> None:
    assert extract_json_object('Step [1]: the result is {"ok": true}') == {"ok": True}
    assert extract_json_object("[1, 2]") is None


def test_extract_json_list() -> None:
    assert extract_json_list("noise [1, 2] noise") == [1, 2]
    assert extract_json_list('{"a": 1}') is None


def test_extract_json_list_unwraps_a_single_list_value() -> None:
    assert extract_json_list('```json\n{"memories": ["a", "b"]}\n```') == ["a", "b"]
    assert extract_json_list('{"reasoning": "short", "memories": [1]}') == [1]
    assert extract_json_list('{"memories": ["a"]}', unwrap=False) is None
    assert extract_json_list('{"a": [1], "b": [2]}') is None


def test_non_string_input_gives_none() -> None:
    assert extract_json(None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not: json}", {"not": "json"}),  # unquoted keys and values
        ("{'when_to_use': 'x', 'content': 'y'}", {"when_to_use": "x", "content": "y"}),  # single quotes
        ('{"when_to_use": "x" "content": "y"}', {"when_to_use": "x", "content": "y"}),  # a missing comma
        ('```json\n[{"a": 1}, {"a": 2}\n```', [{"a": 1}, {"a": 2}]),  # a missing bracket
        ('Sure:\n{"score": 0.8, "keep": True, "note": None}', {"score": 0.8, "keep": True, "note": None}),
        ('[{"a": 1}, {"a": 2}, {"a": 3, "b"', [{"a": 1}, {"a": 2}, {"a": 3}]),  # cut short
        ("[3, 1, 2", [3, 1, 2]),
    ],
)
def test_malformed_json_is_repaired_when_it_has_structure(text: str, expected: object) -> None:
    assert extract_json(text) == expected
