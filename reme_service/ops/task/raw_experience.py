"""The no-LLM summary: one raw experience per trajectory, built deterministically from its messages.

`when_to_use` is the task statement; `content` states the outcome, then the key steps compactly — each tool
call as `name(arguments)` with the start of its result, or, in a run without tool calls, the start of each
assistant reply — and the final answer. Labels follow the service language ("" English, "zh" Chinese).
"""

from __future__ import annotations

from typing import Any

from reme_service.ops.task.trajectories import task_query, trajectory_info
from reme_service.schema.memory import TaskMemory
from reme_service.schema.messages import Message, Role, Trajectory

MAX_STEPS = 8
ARGS_LIMIT = 120
RESULT_LIMIT = 100
TEXT_LIMIT = 160
FINAL_LIMIT = 300

_LABELS: dict[str, dict[str, str]] = {
    "": {
        "success": "succeeded",
        "failure": "failed",
        "outcome": "Outcome: {word} (score {score:.2f})",
        "steps": "Key steps:",
        "final": "Final answer: {text}",
        "more": "- ... {count} more steps",
    },
    "zh": {
        "success": "成功",
        "failure": "失败",
        "outcome": "结果：{word}（得分 {score:.2f}）",
        "steps": "关键步骤：",
        "final": "最终回答：{text}",
        "more": "- ……另有 {count} 步",
    },
}


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _steps(messages: list[Message]) -> list[str]:
    results = {m.tool_call_id: m.text for m in messages if m.role is Role.TOOL and m.tool_call_id}
    steps: list[str] = []
    with_tools = any(m.tool_calls for m in messages)
    for index, msg in enumerate(messages):
        if msg.role is not Role.ASSISTANT:
            continue
        if not with_tools:
            if msg.text.strip():
                steps.append(f"- {_cut(msg.text, TEXT_LIMIT)}")
            continue
        for call in msg.tool_calls:
            result = results.get(call.id) if call.id else None
            if result is None:  # no id: the next tool message answers it
                result = next((m.text for m in messages[index + 1 :] if m.role is Role.TOOL), "")
            line = f"- {call.name}({_cut(call.arguments, ARGS_LIMIT)})"
            steps.append(f"{line} -> {_cut(result, RESULT_LIMIT)}" if result.strip() else line)
    return steps


def raw_experience(trajectory: Trajectory, *, success: bool, workspace_id: str, language: str = "") -> TaskMemory:
    """One task memory that records what happened in `trajectory`, without an LLM."""
    labels = _LABELS.get(language, _LABELS[""])
    messages = list(trajectory.messages)
    word = labels["success" if success else "failure"]
    lines = [labels["outcome"].format(word=word, score=trajectory.score)]
    steps = _steps(messages)
    if steps:
        lines.append(labels["steps"])
        lines += steps[:MAX_STEPS]
        if len(steps) > MAX_STEPS:
            lines.append(labels["more"].format(count=len(steps) - MAX_STEPS))
    final = next((m.text for m in reversed(messages) if m.role is Role.ASSISTANT and m.text.strip()), "")
    if final:
        lines.append(labels["final"].format(text=_cut(final, FINAL_LIMIT)))
    tools = sorted({call.name for m in messages for call in m.tool_calls if call.name})
    metadata: dict[str, Any] = {
        "source": "no_llm",
        "outcome": "success" if success else "failure",
        "tools_used": tools,
        **trajectory_info(trajectory),
    }
    when = task_query(trajectory) or _cut(messages[0].text, TEXT_LIMIT)
    return TaskMemory(workspace_id=workspace_id, when_to_use=when, content="\n".join(lines), metadata=metadata)
