"""A tool usage guideline generated from the call data alone (the no-LLM path of `summary_tool_memory`).

It has the sections of the LLM guideline, each built from the recent calls:

* **Core function**: the tool name, how many calls were analysed, and the parameter names it was called with.
* **Success patterns**: how many calls worked, and the parameter values seen in those calls (most frequent
  first). A call "worked" when the tool reported success and its score is not 0 (an unknown score counts
  by the success flag alone).
* **Common issues**: how many calls failed, the parameter values seen in those calls, and the most frequent
  failure outputs (first line, cut to `OUTPUT_CHARS`).
* **Best practices**: parameter values that only ever appeared in working calls (at least twice) → "prefer";
  values that only appeared in failed calls (at least twice) → "avoid"; then the typical time and token cost.

Values are compared as compact JSON text cut to `VALUE_CHARS`; an input that is not an object counts as one
parameter named `input`.

The text holds no `{` or `}` (JSON objects in values and outputs are shown with parentheses): ReMe's clients pass
retrieved guidelines through `str.format()` (its tool bench builds its prompts so), where a brace raises or is
changed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from reme_service.schema.memory import ToolCallResult

VALUE_CHARS = 40
OUTPUT_CHARS = 80
SHOWN_VALUES = 3
_NO_BRACES = str.maketrans("{}", "()")


def call_worked(call: ToolCallResult) -> bool:
    return call.success and call.score != 0.0


def _value_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def _parameters(call: ToolCallResult) -> dict[str, str]:
    if isinstance(call.input, dict):
        return {str(k): _value_text(v) for k, v in call.input.items()}
    return {"input": _value_text(call.input)} if str(call.input).strip() else {}


def _value_counts(calls: Sequence[ToolCallResult]) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {}
    for call in calls:
        for name, value in _parameters(call).items():
            counts.setdefault(name, Counter())[value] += 1
    return counts


def _describe_values(counts: dict[str, Counter[str]]) -> str:
    parts = []
    for name, values in counts.items():
        shown = ", ".join(f'"{value}"' + (f" ({n}x)" if n > 1 else "") for value, n in values.most_common(SHOWN_VALUES))
        more = len(values) - SHOWN_VALUES
        parts.append(f"{name} = {shown}" + (f" and {more} more" if more > 0 else ""))
    return "; ".join(parts)


def _failure_outputs(calls: Sequence[ToolCallResult]) -> str:
    lines: Counter[str] = Counter()
    for call in calls:
        first = next((line.strip() for line in call.output.splitlines() if line.strip()), "")
        lines[first if len(first) <= OUTPUT_CHARS else first[: OUTPUT_CHARS - 1] + "…"] += 1
    return "; ".join(f'"{line}" ({n}x)' for line, n in lines.most_common(SHOWN_VALUES))


def _practices(good: dict[str, Counter[str]], bad: dict[str, Counter[str]]) -> list[str]:
    out = []
    for name in dict.fromkeys([*good, *bad]):
        ok, failed = good.get(name, Counter()), bad.get(name, Counter())
        prefer = [v for v, n in ok.most_common() if n >= 2 and v not in failed][:SHOWN_VALUES]
        avoid = [v for v, n in failed.most_common() if n >= 2 and v not in ok][:SHOWN_VALUES]
        if prefer:
            out.append(f"Prefer {name} = " + ", ".join(f'"{v}"' for v in prefer) + " (only seen in calls that worked).")
        if avoid:
            out.append(f"Avoid {name} = " + ", ".join(f'"{v}"' for v in avoid) + " (only seen in calls that failed).")
    return out


def data_guideline(tool_name: str, calls: Sequence[ToolCallResult]) -> str:
    """The guideline text (without the statistics block, which the caller appends)."""
    good = [c for c in calls if call_worked(c)]
    bad = [c for c in calls if not call_worked(c)]
    params = list(dict.fromkeys(name for call in calls for name in _parameters(call)))
    good_values, bad_values = _value_counts(good), _value_counts(bad)
    core = f"`{tool_name}`: generated from the data of its last {len(calls)} recorded call(s), without an LLM."
    if params:
        core += " Parameters used: " + ", ".join(params) + "."
    lines = ["## Core Function", core, "", "## Success Patterns"]
    lines.append(f"{len(good)} of {len(calls)} call(s) worked.")
    if good_values:
        lines.append(f"Parameter values in calls that worked: {_describe_values(good_values)}.")
    lines += ["", "## Common Issues", f"{len(bad)} of {len(calls)} call(s) failed or gave a poor result."]
    if bad_values:
        lines.append(f"Parameter values in calls that failed: {_describe_values(bad_values)}.")
    if bad:
        lines.append(f"Most common failure outputs: {_failure_outputs(bad)}.")
    practices = _practices(good_values, bad_values)
    times = [c.time_cost for c in calls]
    tokens = [c.token_cost for c in calls if c.token_cost >= 0]
    cost = f"Expect about {sum(times) / len(times):.2f}s per call" if times else "No timing data yet"
    if tokens:
        cost += f" and about {sum(tokens) / len(tokens):.0f} tokens of input and output"
    practices.append(cost + ".")
    lines += ["", "## Best Practices", *(f"- {p}" for p in practices)]
    return "\n".join(lines).translate(_NO_BRACES)
