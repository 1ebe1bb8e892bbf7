"""Compression: older history becomes one assistant message of state snapshots; the originals go to JSON archives.

The pure parts live here (splitting, grouping, archive texts, reading snapshots out of replies, the extractive
no-LLM snapshot, assembling the result); the LLM calls are made by `offload.py`.

Rules (ReMe 0.2 §8.3, with our fixes):

1. System messages are kept (first, in their order). The other messages split into `older` and `recent` (the last
   `keep_recent_count`); the split is moved earlier when `recent` would otherwise start with tool results, so a
   tool result is never separated from the assistant message that called it (providers reject orphan results).
2. Nothing to compress, or `older` within `max_total_tokens` → no change (unless forced by `auto` mode).
3. `older` is grouped greedily by `group_token_threshold` (0/None: one group; a message above the threshold is a
   group of its own). Group `g` of `G` is archived as pretty JSON to `<store_dir>/<chat_id>_<n>.json` with
   `n = g` for a chat's first compression in that folder, and numbering continued after the highest existing
   `<chat_id>_<n>.json` for later ones (ReMe restarted at 0 and overwrote the earlier archives).
4. Each group's snapshot is appended to one assistant message as
   `[Compressed conversation history - Part g/G]\\n<snapshot>\\n(Original k messages are stored in: <path>)`
   followed by a blank line. The result is system + that message + recent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reme_service.ops.working.message_io import simple_dict
from reme_service.ops.working.paths import join
from reme_service.ops.working.token_count import TokenCounter
from reme_service.schema.messages import Message, Role

HEADER = "[Compressed conversation history - Part {part}/{parts}]"
FOOTER = "(Original {count} messages are stored in: {path})"
_SNAPSHOT_RE = re.compile(r"<state_snapshot>(.*?)</state_snapshot>", re.DOTALL | re.IGNORECASE)
_SPACES = re.compile(r"\s+")

EXTRACTIVE_NOTE = "Extractive snapshot (no LLM was configured): the lines below are quoted from the messages."
MAX_FACTS = 8
MAX_ACTIONS = 8


@dataclass(frozen=True)
class CompressSettings:
    max_total_tokens: int = 20000
    group_token_threshold: int | None = None
    keep_recent_count: int = 10
    store_dir: str = ""
    chat_id: str = "chat"


@dataclass
class CompressionPlan:
    """What one compression will do: the groups to summarise, their archive paths and texts."""

    system: list[Message]
    groups: list[list[Message]]
    recent: list[Message]
    archive_paths: list[str]
    archives: dict[str, str] = field(default_factory=dict)
    #: the first user message of the whole list (the no-LLM snapshot's goal)
    goal: str = ""
    #: tool results of the older history by tool_call_id (the no-LLM snapshot's outcomes, across groups)
    tool_results: dict[str, str] = field(default_factory=dict)


def split_history(messages: Sequence[Message], keep_recent_count: int) -> tuple[list[Message], ...]:
    """`(system, older, recent)`; `recent` never starts with a tool result whose call is in `older`."""
    system = [m for m in messages if m.role is Role.SYSTEM]
    rest = [m for m in messages if m.role is not Role.SYSTEM]
    cut = max(0, len(rest) - keep_recent_count)
    while 0 < cut < len(rest) and rest[cut].role is Role.TOOL:
        cut -= 1
    return system, rest[:cut], rest[cut:]


def group_messages(counts: Sequence[int], threshold: int | None) -> list[list[int]]:
    """Greedy grouping of message indices by token counts (see the module docstring)."""
    if not counts:
        return []
    if not threshold:
        return [list(range(len(counts)))]
    groups: list[list[int]] = []
    current: list[int] = []
    total = 0
    for index, count in enumerate(counts):
        if count > threshold:
            if current:
                groups.append(current)
            groups.append([index])
            current, total = [], 0
        elif total + count <= threshold:
            current.append(index)
            total += count
        else:
            groups.append(current)
            current, total = [index], count
    if current:
        groups.append(current)
    return groups


def plan_compression(
    messages: Sequence[Message],
    settings: CompressSettings,
    counter: TokenCounter,
    *,
    first_index: int = 0,
    force: bool = False,
) -> CompressionPlan | None:
    """The plan, or None when there is nothing to compress (or the older history is within budget)."""
    system, older, recent = split_history(messages, settings.keep_recent_count)
    if not older:
        return None
    if not force and counter.count_messages(older) <= settings.max_total_tokens:
        return None
    counts = [counter.count_message(m) for m in older] if settings.group_token_threshold else [0] * len(older)
    groups = [[older[i] for i in group] for group in group_messages(counts, settings.group_token_threshold)]
    paths = [join(settings.store_dir, f"{settings.chat_id}_{first_index + g}.json") for g in range(len(groups))]
    archives = {path: archive_text(group) for path, group in zip(paths, groups, strict=True)}
    results = {m.tool_call_id: m.text for m in older if m.role is Role.TOOL and m.tool_call_id}
    return CompressionPlan(
        system, groups, recent, paths, archives, goal=first_user_text(messages), tool_results=results
    )


def archive_text(group: Sequence[Message]) -> str:
    """A group's archive: its messages as a pretty-printed JSON list of simple dicts.

    The same text as `json.dumps(simple_dicts(group), ensure_ascii=False, indent=2)`, built message by message:
    that call ends by joining millions of small pieces, and by freeing the whole list of dicts, in single steps
    that hold the GIL (~0.1 s for 100k messages, stalling the event loop while a worker thread runs them). A
    dumped value has no raw newline inside its strings (JSON escapes them), so indenting an item is replacing
    each newline."""
    if not group:
        return "[]"
    # one dict at a time: freeing 100k dicts at once is another long GIL hold
    encode = json.JSONEncoder(ensure_ascii=False, indent=2).encode
    items = (encode(simple_dict(m)).replace("\n", "\n  ") for m in group)
    return "[\n  " + ",\n  ".join(items) + "\n]"


def extract_snapshot(reply: str) -> str | None:
    """The text inside `<state_snapshot>…</state_snapshot>` (the last such block), or None when there is none."""
    blocks = [block.strip() for block in _SNAPSHOT_RE.findall(reply)]
    blocks = [block for block in blocks if block]
    return blocks[-1] if blocks else None


def assemble(plan: CompressionPlan, snapshots: Sequence[str]) -> list[Message]:
    """System messages + one assistant message holding every part + the recent messages."""
    parts = len(plan.groups)
    blocks = [
        f"{HEADER.format(part=g, parts=parts)}\n{snapshot}\n{FOOTER.format(count=len(group), path=path)}\n"
        for g, (group, path, snapshot) in enumerate(zip(plan.groups, plan.archive_paths, snapshots, strict=True))
    ]
    summary = Message(role=Role.ASSISTANT, content="\n".join(blocks))
    return [*plan.system, summary, *plan.recent]


# ---------------------------------------------------------------------------------------------- no-LLM snapshot


def _flat(text: str, limit: int) -> str:
    text = _SPACES.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def first_user_text(messages: Sequence[Message]) -> str:
    return next((m.text for m in messages if m.role is Role.USER and m.text.strip()), "")


def extractive_snapshot(group: Sequence[Message], goal: str, tool_results: Mapping[str, str]) -> str:
    """A deterministic snapshot in the LLM snapshot's shape: the goal is the conversation's first user message,
    the key knowledge the latest user and assistant statements of the group, the recent actions its latest tool
    calls with the start of their results (`tool_results` by call id). Every line is quoted (shortened), nothing
    is invented."""
    # Only the last MAX_FACTS / MAX_ACTIONS lines are kept: walk backwards and stop there (a long group would
    # otherwise flatten every one of its messages).
    facts: list[str] = []
    for message in reversed(group):
        if len(facts) == MAX_FACTS:
            break
        text = message.text
        if message.role in (Role.USER, Role.ASSISTANT) and text.strip() and text != goal:
            facts.append(f"- {message.role.value}: {_flat(text, 200)}")
    facts.reverse()
    actions: list[str] = []
    for message in reversed(group):
        for call in reversed(message.tool_calls):
            if len(actions) == MAX_ACTIONS:
                break
            outcome = tool_results.get(call.id)
            shown = _flat(outcome, 160) if outcome is not None else "(no result recorded)"
            actions.append(f"- called {call.name}({_flat(call.arguments, 120)}) -> {shown}")
        if len(actions) == MAX_ACTIONS:
            break
    actions.reverse()
    lines = [
        EXTRACTIVE_NOTE,
        "<overall_goal>",
        _flat(goal, 300) if goal.strip() else "(no user message)",
        "</overall_goal>",
        "<key_knowledge>",
        *(facts or ["- (none)"]),
        "</key_knowledge>",
        "<recent_actions>",
        *(actions or ["- (none)"]),
        "</recent_actions>",
    ]
    return "\n".join(lines)
