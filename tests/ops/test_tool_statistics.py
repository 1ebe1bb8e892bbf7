"""Tool statistics: one shape always, running totals beyond the history cap, unknown scores left out."""

from __future__ import annotations

from reme_service.ops.tool.statistics import (
    TOTALS_KEY,
    CallTotals,
    record_calls,
    statistics_block,
    tool_statistics,
)
from reme_service.schema.memory import ToolCallResult, ToolMemory

WINDOW_KEYS = {"calls", "successes", "success_rate", "scored_calls", "avg_score", "avg_time_cost", "avg_token_cost"}
TOP_KEYS = {"tool_name", "total_calls", "history_size", "recent_window", "recent", "overall"}


def call(
    i: int, *, success: bool = True, score: float | None = 1.0, time_cost: float = 1.0, tokens: int = 10
) -> ToolCallResult:
    return ToolCallResult(
        tool_name="t", input={"i": i}, output=f"out {i}", success=success, score=score, time_cost=time_cost,
        token_cost=tokens, call_hash=f"h{i}",
    )  # fmt: skip


def test_the_shape_is_the_same_for_an_empty_and_a_full_history() -> None:
    empty = tool_statistics(ToolMemory(when_to_use="t"))
    memory = ToolMemory(when_to_use="t")
    record_calls(memory, [call(1), call(2, success=False, score=0.0)], max_history=100)
    full = tool_statistics(memory)
    for stats in (empty, full):
        assert set(stats) == TOP_KEYS
        assert set(stats["recent"]) == WINDOW_KEYS == set(stats["overall"])
    assert empty["total_calls"] == 0
    assert empty["recent"]["success_rate"] is None and empty["recent"]["avg_score"] is None
    assert full["recent"] == {
        "calls": 2,
        "successes": 1,
        "success_rate": 0.5,
        "scored_calls": 2,
        "avg_score": 0.5,
        "avg_time_cost": 1.0,
        "avg_token_cost": 10.0,
    }


def test_totals_count_every_call_while_the_history_is_capped() -> None:
    memory = ToolMemory(when_to_use="t")
    for start in range(0, 25, 5):
        record_calls(
            memory, [call(i, success=i % 5 != 0, time_cost=2.0) for i in range(start, start + 5)], max_history=10
        )
    assert [c.call_hash for c in memory.tool_call_results] == [f"h{i}" for i in range(15, 25)]
    stats = tool_statistics(memory, recent=4)
    assert stats["total_calls"] == 25 and stats["history_size"] == 10 and stats["recent_window"] == 4
    assert stats["overall"]["calls"] == 25 and stats["overall"]["successes"] == 20
    assert stats["overall"]["success_rate"] == 0.8
    assert stats["recent"]["calls"] == 4
    assert memory.metadata[TOTALS_KEY]["calls"] == 25


def test_unknown_scores_are_left_out_of_the_average_and_the_memory_score_follows_known_ones() -> None:
    memory = ToolMemory(when_to_use="t")
    record_calls(
        memory, [call(1, score=None), call(2, score=0.0), call(3, score=1.0), call(4, score=1.0)], max_history=100
    )
    stats = tool_statistics(memory)
    assert stats["recent"]["scored_calls"] == 3
    assert stats["recent"]["avg_score"] == 0.667
    assert memory.score == 0.6667
    only_unknown = ToolMemory(when_to_use="t")
    record_calls(only_unknown, [call(1, score=None)], max_history=100)
    assert tool_statistics(only_unknown)["overall"]["avg_score"] is None
    assert only_unknown.score == 0.0


def test_a_memory_without_totals_gets_them_from_its_history() -> None:
    legacy = ToolMemory(when_to_use="t", tool_call_results=[call(1), call(2, success=False), call(3, tokens=-1)])
    stats = tool_statistics(legacy)
    assert stats["total_calls"] == 3 and stats["overall"]["successes"] == 2
    assert stats["overall"]["avg_token_cost"] == 10.0  # the unknown (-1) token cost is left out
    legacy.metadata[TOTALS_KEY] = {"calls": "many"}  # malformed totals are ignored, not trusted
    assert tool_statistics(legacy)["total_calls"] == 3


def test_totals_round_trip_through_metadata() -> None:
    totals = CallTotals.of([call(1), call(2, score=None, success=False, time_cost=0.5)])
    assert CallTotals.from_dict(totals.to_dict()) == totals
    assert CallTotals.from_dict({"calls": -1}) is None
    assert CallTotals.from_dict(None) is None


def test_statistics_block_keeps_reme_lines_and_adds_the_overall_figures() -> None:
    memory = ToolMemory(when_to_use="web_search")
    record_calls(
        memory,
        [call(1, time_cost=2.3, tokens=150), call(2, success=False, time_cost=1.0, tokens=6)],
        max_history=100,
    )
    block = statistics_block(tool_statistics(memory))
    assert block.splitlines()[:5] == [
        "## Statistics",
        "- **Success Rate**: 50.00%",
        "- **Average Score**: 1.000",
        "- **Average Time Cost**: 1.650s",
        "- **Average Token Cost**: 78.0",
    ]
    assert "- **Calls Analysed**: the last 2 of 2" in block
    empty = statistics_block(tool_statistics(ToolMemory(when_to_use="t")))
    assert "- **Average Score**: unknown" in empty
