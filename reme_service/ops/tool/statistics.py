"""Tool-call statistics: running totals over every call ever recorded, and windows over the recent history.

A `ToolMemory` keeps at most `max_history_tool_call_cnt` call records, so statistics "overall" cannot be
computed from the history alone. Every append therefore also adds to running totals kept in the memory's
inner metadata under `call_totals` (`CallTotals`). A memory written before totals existed (e.g. by ReMe)
gets totals computed from its history the first time it is read.

`tool_statistics` always returns the same shape (ReMe's `statistic()` returned two different ones):

```
{"tool_name": str, "total_calls": int, "history_size": int, "recent_window": int,
 "recent": Window, "overall": Window}
Window = {"calls": int, "successes": int, "success_rate": float | None, "scored_calls": int,
          "avg_score": float | None, "avg_time_cost": float | None, "avg_token_cost": float | None}
```

An average is `None` when there is nothing to average: no calls, no call with a known score (`score` null:
the judgement failed), or no call with a known token cost. Rounding follows ReMe: success rate to 4 places,
score and time to 3, tokens to 2.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from reme_service.schema.memory import ToolCallResult, ToolMemory

TOTALS_KEY = "call_totals"
DEFAULT_RECENT_WINDOW = 20


@dataclass
class CallTotals:
    """Sums over a set of calls; what a statistics window is computed from."""

    calls: int = 0
    successes: int = 0
    scored_calls: int = 0
    score_sum: float = 0.0
    time_cost_sum: float = 0.0
    token_calls: int = 0
    token_cost_sum: int = 0

    def add(self, call: ToolCallResult) -> None:
        self.calls += 1
        self.successes += int(call.success)
        if call.score is not None:
            self.scored_calls += 1
            self.score_sum += call.score
        self.time_cost_sum += call.time_cost
        if call.token_cost >= 0:
            self.token_calls += 1
            self.token_cost_sum += call.token_cost

    @classmethod
    def of(cls, calls: Iterable[ToolCallResult]) -> CallTotals:
        totals = cls()
        for call in calls:
            totals.add(call)
        return totals

    @classmethod
    def from_dict(cls, data: Any) -> CallTotals | None:
        """Totals stored in a memory's metadata, or None when absent or malformed."""
        if not isinstance(data, dict):
            return None
        values: dict[str, Any] = {}
        for field in fields(cls):
            value = data.get(field.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                return None
            values[field.name] = float(value) if isinstance(field.default, float) else int(value)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["score_sum"] = round(self.score_sum, 6)
        data["time_cost_sum"] = round(self.time_cost_sum, 6)
        return data

    def window(self) -> dict[str, Any]:
        """The statistics of these calls (the `Window` shape of the module docstring)."""
        return {
            "calls": self.calls,
            "successes": self.successes,
            "success_rate": round(self.successes / self.calls, 4) if self.calls else None,
            "scored_calls": self.scored_calls,
            "avg_score": round(self.score_sum / self.scored_calls, 3) if self.scored_calls else None,
            "avg_time_cost": round(self.time_cost_sum / self.calls, 3) if self.calls else None,
            "avg_token_cost": round(self.token_cost_sum / self.token_calls, 2) if self.token_calls else None,
        }


def totals_of(memory: ToolMemory) -> CallTotals:
    """The running totals of a memory; computed from its history when it has none (or they lag behind it)."""
    stored = CallTotals.from_dict(memory.metadata.get(TOTALS_KEY))
    if stored is None or stored.calls < len(memory.tool_call_results):
        return CallTotals.of(memory.tool_call_results)
    return stored


def record_calls(memory: ToolMemory, calls: Sequence[ToolCallResult], *, max_history: int) -> None:
    """Append `calls`, add them to the totals, keep the last `max_history` records, refresh `score`.

    The memory's own `score` becomes the average judged score over all calls (0 while none is known).
    """
    totals = totals_of(memory)
    for call in calls:
        totals.add(call)
    history = [*memory.tool_call_results, *calls]
    memory.tool_call_results = history[-max_history:] if max_history > 0 else history
    memory.metadata = {**memory.metadata, TOTALS_KEY: totals.to_dict()}
    memory.score = round(totals.score_sum / totals.scored_calls, 4) if totals.scored_calls else 0.0


def tool_statistics(memory: ToolMemory, recent: int = DEFAULT_RECENT_WINDOW) -> dict[str, Any]:
    """The statistics of one tool (always the shape in the module docstring)."""
    window = max(1, recent)
    history = memory.tool_call_results
    totals = totals_of(memory)
    return {
        "tool_name": memory.when_to_use,
        "total_calls": totals.calls,
        "history_size": len(history),
        "recent_window": window,
        "recent": CallTotals.of(history[-window:]).window(),
        "overall": totals.window(),
    }


def _pct(rate: float | None) -> str:
    return "unknown" if rate is None else f"{rate * 100:.2f}%"


def _num(value: float | None, fmt: str, unit: str = "") -> str:
    return "unknown" if value is None else f"{value:{fmt}}{unit}"


def statistics_block(stats: dict[str, Any]) -> str:
    """The Markdown block appended to a usage guideline.

    The first four lines keep ReMe's labels and formats (recent window); two more lines give the size of the
    window and the overall figures.
    """
    recent, overall = stats["recent"], stats["overall"]
    return "\n".join(
        [
            "## Statistics",
            f"- **Success Rate**: {_pct(recent['success_rate'])}",
            f"- **Average Score**: {_num(recent['avg_score'], '.3f')}",
            f"- **Average Time Cost**: {_num(recent['avg_time_cost'], '.3f', 's')}",
            f"- **Average Token Cost**: {_num(recent['avg_token_cost'], '.1f')}",
            f"- **Calls Analysed**: the last {recent['calls']} of {stats['total_calls']}",
            f"- **Overall**: success rate {_pct(overall['success_rate'])}, average score "
            f"{_num(overall['avg_score'], '.3f')}, average time {_num(overall['avg_time_cost'], '.3f', 's')}, "
            f"average tokens {_num(overall['avg_token_cost'], '.1f')}",
        ]
    )
