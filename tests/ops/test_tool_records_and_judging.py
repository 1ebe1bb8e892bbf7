"""Checking tool-call records, the heuristic judge, the LLM verdict parser, and the data-driven guideline."""

from __future__ import annotations

import json

import pytest

from reme_service.ops.tool.call_records import check_calls
from reme_service.ops.tool.data_guideline import data_guideline
from reme_service.ops.tool.judging import binary_score, heuristic_verdict, parse_verdict
from reme_service.ops.tool.mock_search_tools import MOCK_SEARCH_TOOLS, call_rng, classify_heuristic, draw_outcome
from reme_service.ops.tool.summary_tool_memory_op import parse_guideline
from reme_service.schema.memory import ToolCallResult
from reme_service.schema.requests import parse_tool_names


def test_each_rejected_record_lists_every_reason() -> None:
    accepted, rejected = check_calls(
        [
            {"tool_name": "ok", "input": {"q": "x"}, "output": "fine"},
            {"output": ""},
            {"tool_name": "  ", "output": "x"},
            {"tool_name": "t", "output": "x", "time_cost": -2},
            {"tool_name": "t", "output": "x", "success": "perhaps"},
            "not an object",
            {"tool_name": "x" * 300, "output": "x"},
        ]
    )
    assert [c.tool_name for c in accepted] == ["ok"]
    assert [(r.index, r.reasons) for r in rejected] == [
        (1, ("tool_name is missing", "output is empty")),
        (2, ("tool_name is empty",)),
        (3, ("time_cost is negative",)),
        (4, ("success: Input should be a valid boolean, unable to interpret input",)),
        (5, ("a tool call record must be a JSON object, not str",)),
        (6, ("tool_name is longer than 256 characters",)),
    ]
    assert rejected[0].describe() == "#1: tool_name is missing; output is empty"


def test_accepted_records_get_hash_token_estimate_and_lenient_shapes() -> None:
    accepted, rejected = check_calls(
        [
            {"tool_name": " web_search ", "input": {"b": 1, "a": "x"}, "output": "Found 10 results", "token_cost": 150},
            {"tool_name": "clock", "input": None, "output": {"time": "10:00"}, "is_summarized": True, "score": 0.3},
            {"tool_name": "clock", "output": "10:00", "call_hash": "client-hash"},
        ]
    )
    assert rejected == []
    search, clock, given = accepted
    assert search.tool_name == "web_search" and search.token_cost == 150
    assert (
        search.call_hash
        == ToolCallResult(tool_name="x", input={"a": "x", "b": 1}, output="Found 10 results").compute_hash()
    )
    assert clock.input == "" and clock.output == json.dumps({"time": "10:00"})
    assert clock.token_cost == (len("") + len(clock.output)) // 4  # ReMe's estimate for an unknown cost
    assert clock.is_summarized is False
    assert given.call_hash == "client-hash"


@pytest.mark.parametrize(
    ("success", "output", "score", "rule"),
    [
        (True, "Found 10 relevant results about asyncio", 1.0, "no error marker"),
        (False, "Found 10 results", 0.0, "success: false"),
        (True, "Error: connection refused", 0.0, "looks like an error"),
        (True, "Request timed out after 30s", 0.0, "looks like an error"),
        (True, "No results found for your query", 0.0, "looks like an error"),
        (True, "HTTP 503 service unavailable", 0.0, "looks like an error"),
        (True, '{"success": false, "content": "busy"}', 0.0, "success: false"),
        (True, '{"error": "quota exceeded"}', 0.0, "'error' field"),
        (True, '{"success": true, "content": "the answer"}', 1.0, "no error marker"),
    ],
)
def test_heuristic_judge(success: bool, output: str, score: float, rule: str) -> None:
    verdict = heuristic_verdict(ToolCallResult(tool_name="search", input={"q": "x"}, output=output, success=success))
    assert verdict.score == score and verdict.judge == "heuristic"
    assert rule in verdict.evaluation
    assert verdict.summary.startswith('search({"q": "x"}) -> ')


def test_llm_verdicts_are_binarised_and_malformed_ones_refused() -> None:
    good = parse_verdict('Sure.\n```json\n{"summary": " Looked  up x ", "evaluation": "Useful.", "score": 0.7}\n```')
    assert good is not None and (good.score, good.summary, good.evaluation) == (1.0, "Looked up x", "Useful.")
    zero = parse_verdict('{"summary": "s", "evaluation": "e", "score": "0"}')
    assert zero is not None and zero.score == 0.0
    for bad in ("no json here", '{"summary": "s"}', '{"score": 3}', '{"score": "high"}', '{"score": 1, "summary": 5}'):
        assert parse_verdict(bad) is None, bad
    assert [binary_score(v) for v in (0.49, 0.5, True, "1", None, -0.1)] == [0.0, 1.0, 1.0, 1.0, None, None]


def test_guideline_parser_takes_the_txt_block_or_the_whole_reply() -> None:
    assert parse_guideline("Here:\n```txt\n## Core Function\nSearches.\n```\nthanks") == "## Core Function\nSearches."
    assert parse_guideline("  plain guideline  ") == "plain guideline"
    assert parse_guideline("```txt\n\n```") is None
    assert parse_guideline("") is None


def test_tool_names_accept_a_string_or_a_list() -> None:
    assert parse_tool_names("web_search, calc,,web_search") == ["web_search", "calc"]
    assert parse_tool_names([" a ", "b", "a"]) == ["a", "b"]
    for empty in ("", " , ", [], ["  "]):
        with pytest.raises(ValueError):
            parse_tool_names(empty)


def test_data_guideline_contrasts_working_and_failing_parameters() -> None:
    calls = [
        ToolCallResult(
            tool_name="s", input={"q": f"q{i}", "limit": 10}, output="results", time_cost=1.0, token_cost=20, score=1.0
        )
        for i in range(3)
    ] + [
        ToolCallResult(
            tool_name="s", input={"q": "big", "limit": 500}, output="Error: limit too large\nmore", score=0.0
        )
        for _ in range(2)
    ]
    text = data_guideline("s", calls)
    for section in ("## Core Function", "## Success Patterns", "## Common Issues", "## Best Practices"):
        assert section in text
    assert "3 of 5 call(s) worked." in text
    assert 'limit = "10" (3x)' in text
    assert 'Most common failure outputs: "Error: limit too large" (2x)' in text
    assert 'Prefer limit = "10"' in text and 'Avoid limit = "500"' in text
    assert "Parameters used: q, limit." in text


def test_mock_tools_follow_their_rates_and_are_seeded() -> None:
    tool_a = MOCK_SEARCH_TOOLS[0]
    draws = [draw_outcome(tool_a, "simple", call_rng(0, 0, tool_a, f"query {i}")).kind for i in range(2000)]
    relevant = draws.count("relevant") / len(draws)
    assert abs(relevant - 0.9 * 0.9) < 0.04  # relevant = not failed (0.9) and on topic (0.9)
    again = [draw_outcome(tool_a, "simple", call_rng(0, 0, tool_a, f"query {i}")).kind for i in range(2000)]
    assert draws == again
    other_seed = [draw_outcome(tool_a, "simple", call_rng(0, 1, tool_a, f"query {i}")).kind for i in range(2000)]
    assert draws != other_seed
    assert classify_heuristic("capital of France") == "simple"
    assert classify_heuristic("How do vaccines train the immune system over time?") == "medium"
    assert classify_heuristic("Compare A and B and analyse the trade-offs for small teams") == "complex"
