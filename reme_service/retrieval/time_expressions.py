"""Find the periods a text speaks of, read against the moment it was said; detect time words and time questions.

`find_time_spans("I went to a support group yesterday", datetime(2023, 5, 8, 13, 56))` gives one span,
2023-05-07, with the text "yesterday". English and Chinese rules both run on every text (a message may mix
them). When expressions overlap, the one starting first wins, then the longest ("8 May 2023" over "8 May").

The rules cost ~2 µs a character, so they read at most the first `MAX_TIME_TEXT` characters of a text (a 9 MB query
held the event loop for 17 s), and the query ops run them through `off_loop_for`: in the service's regex lane, off
the event loop, for a text longer than `INLINE_TIME_TEXT`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from reme_service.concurrency import ThreadLane
from reme_service.retrieval import time_expr_en, time_expr_zh
from reme_service.retrieval.time_rules import Reference, find_spans
from reme_service.retrieval.timespan import TimeSpan

T = TypeVar("T")

MAX_TIME_TEXT = 20_000  # characters of a text the rules read (~40 ms at most): periods are named near the start
INLINE_TIME_TEXT = 2_000  # a longer query is read off the event loop (`off_loop_for`)

_TIME_WORD_TEXT = """
    year years yr yrs month months week weeks wk day days hour hours hr hrs minute minutes seconds today tonight
    tomorrow tmrw yesterday yday morning mornings afternoon evening evenings night nights midnight noon weekend
    weekends weekday weekdays spring summer autumn winter season decade decades century semester quarter fortnight
    ago recently lately earlier later birthday anniversary holiday holidays christmas easter thanksgiving monday
    tuesday wednesday thursday friday saturday sunday mon tue tues thu thur thurs fri january february march april
    june july august september october november december jan feb apr jun jul aug sep sept oct nov dec
"""
_TIME_WORDS_EN = frozenset(_TIME_WORD_TEXT.split())
_TIME_WORDS_ZH = (
    "年",
    "月",
    "日",
    "天",
    "周",
    "星期",
    "礼拜",
    "小时",
    "分钟",
    "点",
    "秒",
    "早上",
    "上午",
    "中午",
    "下午",
    "晚上",
    "凌晨",
    "昨",
    "今",
    "明",
    "春",
    "夏",
    "秋",
    "冬",
    "最近",
    "以前",
    "之前",
    "后来",
    "岁",
    "节",
)
# Years, clock times and "3 pm"; words like "am", "sat" or "fall" alone are too often something else.
_NUMERIC_TIME_RE = re.compile(r"\b(?:19|20)\d{2}\b|\d{1,2}:\d{2}|\b\d{1,2}\s*(?:am|pm|a\.m\.|p\.m\.)", re.IGNORECASE)
_TOKEN_RE = re.compile(r"[A-Za-z]+")
_LOWER_TOKEN_RE = re.compile(r"[a-z]+")
_DIGIT_RE = re.compile(r"\d")  # every form `_NUMERIC_TIME_RE` matches has a digit
_MAY_RE = re.compile(r"\bMay\b")
_TIME_QUESTION_RE = re.compile(
    r"^\W*when\b|\bwhen\s+(?:did|does|do|is|was|were|will|would|has|have|had|are|can|could)\b"
    r"|\b(?:what\s+time|what\s+date|which\s+(?:day|date|year|month|week)|what\s+(?:day|year|month)\s+(?:did|was|is)|"
    r"how\s+long\s+(?:ago|has|have|had|since)|since\s+when)\b"
    r"|什么时候|何时|哪天|哪一天|几号|哪年|哪一年|几月|多久以前|多久前|多长时间|什么时间|几点|哪个月",
    re.IGNORECASE,
)


def speaks_of_future(text: str) -> bool:
    return bool(time_expr_en.FUTURE_RE.search(text) or time_expr_zh.FUTURE_RE.search(text))


def find_time_spans(text: str, moment: datetime, *, future: bool | None = None) -> list[TimeSpan]:
    """The periods `text` names, in order of appearance, read against `moment`. `future` overrides the
    detection of whether the text speaks of the future (bare weekdays and months then point forwards)."""
    if not text:
        return []
    text = text[:MAX_TIME_TEXT]
    ref = Reference(moment, speaks_of_future(text) if future is None else future)
    found = find_spans(text, time_expr_en.RULES, ref) + find_spans(text, time_expr_zh.RULES, ref)
    found.sort(key=lambda item: (item[0], item[0] - item[1]))
    chosen: list[TimeSpan] = []
    end = -1
    for start, stop, span in found:
        if start >= end:
            chosen.append(span)
            end = stop
    return chosen


async def off_loop_for(lane: ThreadLane, rules: Callable[[str, datetime], T], text: str, moment: datetime) -> T:
    """`rules(text, moment)` (`find_time_spans`, or a reading built on it), in `lane` when `text` is long enough to
    hold the event loop, else right here."""
    return await lane.call(len(text) <= INLINE_TIME_TEXT, rules, text, moment)


def has_time_word(text: str) -> bool:
    """Whether the text mentions time at all (a wider net than `find_time_spans`, which must resolve it)."""
    # ASCII text is lowered whole, then split (twice as fast as lowering each token; the retrieval rescoring
    # asks this of every candidate); other text keeps the exact letter runs
    text = text[:MAX_TIME_TEXT]
    tokens = _LOWER_TOKEN_RE.findall(text.lower()) if text.isascii() else [t.lower() for t in _TOKEN_RE.findall(text)]
    if not _TIME_WORDS_EN.isdisjoint(tokens):
        return True
    if (_DIGIT_RE.search(text) and _NUMERIC_TIME_RE.search(text)) or _MAY_RE.search(text):
        return True
    return not text.isascii() and any(word in text for word in _TIME_WORDS_ZH)  # Chinese words: not in ASCII


def asks_about_time(text: str) -> bool:
    """Whether a question asks when something happened ("When did ...", "how long ago", "什么时候")."""
    if text.isascii():  # every English form holds one of these words (a quarter of the regex's cost to rule out)
        lower = text.lower()
        if "when" not in lower and "what" not in lower and "which" not in lower and "long" not in lower:
            return False
    return bool(_TIME_QUESTION_RE.search(text))
