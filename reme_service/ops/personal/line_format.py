"""Parsers of the line formats the personal-memory prompts ask for.

Every prompt asks for lines `<Label>: <fields separated by |>` (Chinese prompts use the Chinese label and a
full-width colon, both accepted in either language). Items are numbered from 1. Each parser returns None when
the reply does not follow its format, so `chat_parsed` re-asks the LLM and, after the last attempt, fails the
request with an `LLMError` (HTTP 502) — a malformed reply is never taken as "nothing to store".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NONE_WORDS = frozenset({"none", "null", "n/a", "无", "没有", "repeat", "重复", ""})
_VERDICTS = {
    "contradiction": "contradiction",
    "矛盾": "contradiction",
    "contained": "contained",
    "被包含": "contained",
    "包含": "contained",
    "none": "none",
    "无": "none",
}


def _payloads(reply: str, *labels: str) -> list[str]:
    """The text after `Label:` on each line that starts with one of `labels` (bullets and bold allowed)."""
    names = "|".join(re.escape(label) for label in labels)
    pattern = re.compile(rf"^[\s>*#\-•]*(?:\*\*)?(?:{names})(?:\*\*)?\s*[:：]\s*(.*)$", re.IGNORECASE)
    return [m.group(1).strip().strip("*").strip() for line in reply.splitlines() if (m := pattern.match(line))]


def _index(text: str, count: int) -> int | None:
    match = re.fullmatch(r"\s*[#(\[]?(\d+)[)\].]?\s*", text)
    if not match:
        return None
    index = int(match.group(1))
    return index if 1 <= index <= count else None


def is_none(text: str) -> bool:
    return text.strip().strip(".。<>").strip().lower() in _NONE_WORDS


def parse_scores(reply: str, count: int) -> dict[int, int] | None:
    """`Result: <n> | <0-3>` for every item 1..count; None unless each item got a score."""
    scores: dict[int, int] = {}
    for payload in _payloads(reply, "Result", "结果"):
        match = re.fullmatch(r"[#(\[]?(\d+)[)\]]?\s*[|,\s]\s*([0-3])\b.*", payload)
        if match and 1 <= int(match.group(1)) <= count:
            scores.setdefault(int(match.group(1)), int(match.group(2)))
    return scores if len(scores) == count else None


@dataclass(frozen=True)
class Observation:
    """One extracted piece of information about the user: the item it came from, its text, its keywords and
    (when asked for) the time it refers to, as written by the LLM."""

    index: int
    content: str
    keywords: list[str]
    time_text: str = ""


def _split_keywords(text: str) -> list[str]:
    return [k.strip() for k in re.split(r"[,，;；、]", text) if k.strip() and not is_none(k)]


def parse_observations(reply: str, count: int, *, with_time: bool) -> list[Observation] | None:
    """`Information: <n> | [<time> |] <information or None> | <keywords>`; None unless every item 1..count has at
    least one line. Lines whose information is None (nothing about the user) are valid and produce nothing."""
    found: list[Observation] = []
    answered: set[int] = set()
    for payload in _payloads(reply, "Information", "信息"):
        parts = [p.strip() for p in payload.split("|")]
        needed = 3 if with_time else 2
        if len(parts) < needed:
            continue
        index = _index(parts[0], count)
        if index is None:
            continue
        answered.add(index)
        time_text = parts[1] if with_time else ""
        content = parts[needed - 1]
        extra = "|".join(parts[needed:])
        if is_none(content):
            continue
        found.append(Observation(index, content, _split_keywords(extra), "" if is_none(time_text) else time_text))
    return found if len(answered) == count else None


@dataclass(frozen=True)
class Judgment:
    index: int
    verdict: str  # contradiction | contained | none
    corrected: str = ""


def parse_judgments(reply: str, count: int, *, with_correction: bool = False) -> dict[int, Judgment] | None:
    """`Judgment: <n> | <Contradiction|Contained|None> [| <corrected text>]`; None when no line parses.
    Items without a line keep their place (verdict none)."""
    judged: dict[int, Judgment] = {}
    for payload in _payloads(reply, "Judgment", "Judgement", "判断"):
        parts = [p.strip() for p in payload.split("|")]
        if len(parts) < 2:
            continue
        index = _index(parts[0], count)
        verdict = _VERDICTS.get(parts[1].strip(".。").lower())
        if index is None or verdict is None:
            continue
        corrected = "|".join(parts[2:]).strip() if with_correction and verdict == "contradiction" else ""
        judged.setdefault(index, Judgment(index, verdict, "" if is_none(corrected) else corrected))
    return judged if judged else None


def parse_subjects(reply: str) -> list[str] | None:
    """`Subject: <short noun phrase>` lines (`Subject: None` for none); None when there is no such line."""
    payloads = _payloads(reply, "Subject", "主题")
    if not payloads:
        return None
    return [p.strip(" .。") for p in payloads if not is_none(p)]


def parse_value(reply: str) -> str | None:
    """The text of the first `Value: <text>` line ("" for `Value: None`); None when there is no such line."""
    payloads = _payloads(reply, "Value", "取值")
    if not payloads:
        return None
    return "" if is_none(payloads[0]) else payloads[0]


def parse_time(reply: str) -> str | None:
    """The text of the first `Time: <period>` line ("" for `Time: none`); None when there is no such line."""
    payloads = _payloads(reply, "Time", "时间")
    if not payloads:
        return None
    return "" if is_none(payloads[0]) else payloads[0]


def parse_rankings(reply: str, count: int) -> dict[int, float] | None:
    """`Score: <n> | <0.0-1.0>` for items 1..count; None when no line parses. Unlisted items are absent."""
    scores: dict[int, float] = {}
    for payload in _payloads(reply, "Score", "评分"):
        match = re.fullmatch(r"[#(\[]?(\d+)[)\]]?\s*[|,\s]\s*([01](?:\.\d+)?|\.\d+)\b.*", payload)
        if match and 1 <= int(match.group(1)) <= count and float(match.group(2)) <= 1.0:
            scores.setdefault(int(match.group(1)), float(match.group(2)))
    return scores if scores else None
