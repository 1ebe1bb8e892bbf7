"""Read the absolute time of a message or a query: ISO strings, epoch seconds, and written-out dates.

Accepted (a date is always required; the time of day is optional and defaults to midnight):

* numbers, or strings of digits: epoch seconds (milliseconds when larger than 10^11), in the server's local time;
* ISO 8601 and ReMe's format: `2023-05-08`, `2023-05-08 13:56`, `2023-05-08 13:56:07`, `2023-05-08T13:56:07.5Z`,
  `2023-05-08T13:56:07+08:00`, also with `/` or `.` between the date parts. A zone suffix is accepted and
  dropped: the wall-clock time the user spoke at is what relative dates ("yesterday") are read against;
* written English: `1:56 pm on 8 May, 2023` (LoCoMo's session dates), `May 8, 2023 13:56`, `Monday, 8th May 2023`;
* written Chinese: `2023年5月8日 13:56`, `2023年5月8号 下午1点56分`, `2023年5月8日 星期一`.

Anything else — or anything left over once the date, the time and filler words are taken out — is refused with
a `ValueError` that says what is accepted.
"""

from __future__ import annotations

import re
from datetime import datetime

from reme_service.retrieval.timespan import MONTH_PATTERN, MONTH_WORDS, TIME_FORMAT, safe_date

_ISO_RE = re.compile(
    r"^(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})"
    r"(?:[T\s]+(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?)?"
    r"\s*(?:Z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)?$",
    re.IGNORECASE,
)
_DATE_RES = (
    # 8 May, 2023 / 8th of May 2023
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({MONTH_PATTERN})\.?,?\s+(\d{{4}})\b", re.I), "dmy"),
    # May 8, 2023 / May 8th 2023
    (re.compile(rf"\b({MONTH_PATTERN})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I), "mdy"),
    # 2023年5月8日 / 2023年5月8号
    (re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]"), "ymd"),
    # 2023-05-08 inside other words
    (re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b"), "ymd"),
)
_TIME_RES = (
    # 1:56 pm, 1 pm, 1:56:07 a.m.
    (re.compile(r"\b(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?\s*([ap])\.?\s?m\b\.?", re.I), "12h"),
    # 下午1点56分, 下午1:56, 13点, 9点半
    (
        re.compile(
            r"(上午|早上|早晨|凌晨|中午|下午|傍晚|晚上)?\s*(\d{1,2})\s*(?:[点时]\s*(?:(\d{1,2})\s*分?|(半))?|[:：](\d{2}))"
        ),
        "zh",
    ),
    # 13:56, 13:56:07
    (re.compile(r"\b(\d{1,2}):(\d{2})(?::(\d{2}))?\b"), "24h"),
)
_FILLER_RE = re.compile(
    r"\b(?:on|at|the|of|mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday)\b|(?:星期|周|礼拜)[一二三四五六日天]|[,，.、\s]|的",
    re.IGNORECASE,
)
_PM_WORDS = {"下午", "傍晚", "晚上"}

EXPECTED = (
    "use e.g. '2023-05-08 13:56:00', '2023-05-08T13:56:00Z', epoch seconds, '1:56 pm on 8 May, 2023' "
    "or '2023年5月8日 13:56'"
)


def _from_epoch(value: float) -> datetime:
    seconds = value / 1000 if abs(value) > 1e11 else value
    try:
        return datetime.fromtimestamp(seconds)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"epoch time {value!r} is out of range") from None


def _hour_12(hour: int, half: str) -> int:
    if not 1 <= hour <= 12:
        raise ValueError(f"hour {hour} is not a 12-hour clock hour")
    return hour % 12 + (12 if half.lower() == "p" else 0)


def _time_of_day(match: re.Match[str], kind: str) -> tuple[int, int, int]:
    if kind == "12h":
        hour = _hour_12(int(match.group(1)), match.group(4))
        return hour, int(match.group(2) or 0), int(match.group(3) or 0)
    if kind == "24h":
        return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
    period, hour = match.group(1), int(match.group(2))
    minute = 30 if match.group(4) else int(match.group(3) or match.group(5) or 0)
    if (period in _PM_WORDS and hour < 12) or (period == "中午" and hour < 6):
        hour += 12
    return hour, minute, 0


def _date_parts(match: re.Match[str], kind: str) -> tuple[int, int, int]:
    if kind == "dmy":
        return int(match.group(3)), MONTH_WORDS[match.group(2).lower()], int(match.group(1))
    if kind == "mdy":
        return int(match.group(3)), MONTH_WORDS[match.group(1).lower()], int(match.group(2))
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def _cut(text: str, match: re.Match[str]) -> str:
    return text[: match.start()] + " " + text[match.end() :]


def _written(text: str) -> datetime | None:
    """A written-out date with an optional time of day, or None when the text is not only that."""
    date_parts: tuple[int, int, int] | None = None
    for pattern, kind in _DATE_RES:
        match = pattern.search(text)
        if match:
            date_parts = _date_parts(match, kind)
            text = _cut(text, match)
            break
    if date_parts is None:
        return None
    clock = (0, 0, 0)
    for pattern, kind in _TIME_RES:
        match = pattern.search(text)
        if match:
            clock = _time_of_day(match, kind)
            text = _cut(text, match)
            break
    if _FILLER_RE.sub("", text):
        return None
    day = safe_date(*date_parts)
    if day is None or not (0 <= clock[0] < 24 and 0 <= clock[1] < 60 and 0 <= clock[2] < 60):
        raise ValueError("the date or time of day does not exist")
    return day.replace(hour=clock[0], minute=clock[1], second=clock[2])


def _iso(match: re.Match[str]) -> datetime:
    year, month, day = (int(g) for g in match.group(1, 2, 3))
    hour, minute, second = (int(g or 0) for g in match.group(4, 5, 6))
    moment = safe_date(year, month, day)
    if moment is None or not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= second < 60):
        raise ValueError("the date or time of day does not exist")
    return moment.replace(hour=hour, minute=minute, second=second)


def parse_timestamp(value: object) -> datetime:
    """The naive local datetime `value` denotes; `ValueError` (saying what is accepted) when it denotes none."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"a timestamp is a string or a number, not {type(value).__name__}; {EXPECTED}")
    if isinstance(value, int | float):
        return _from_epoch(float(value))
    text = value.strip()
    if re.fullmatch(r"-?\d+(?:\.\d+)?", text):
        return _from_epoch(float(text))
    try:
        iso = _ISO_RE.match(text)
        if iso:
            return _iso(iso)
        written = _written(text)
    except ValueError as exc:
        raise ValueError(f"cannot read {value!r} as a date and time: {exc}; {EXPECTED}") from None
    if written is None:
        raise ValueError(f"cannot read {value!r} as a date and time; {EXPECTED}")
    return written


def normalise_timestamp(value: object) -> str:
    """`value` in ReMe's `YYYY-MM-DD HH:MM:SS` format (see `parse_timestamp`)."""
    return parse_timestamp(value).strftime(TIME_FORMAT)
