"""English time expressions, read against the moment they were said.

Covered: ISO dates; written dates with or without a year ("8 May 2023", "May 8th", "the 8th of May"); months
("May 2023", "last March", "in August"); years ("in 2022", "since 2016"); seasons ("last summer", "the summer of
2022"); today / tonight / yesterday / tomorrow / last night / the day before yesterday; "N days / weeks /
weekends / months / years ago" and "in N ..." / "N ... later" (numbers as digits or words, "a few" as a range);
"last / this / next / past week, weekend, month, year", "the week before"; weekdays ("last Friday", "on Friday",
"next Tuesday").

Bare weekdays, months and seasons point backwards unless the sentence speaks about the future ("will",
"going to", "plan to", ...). "may" in lower case is the verb, not the month.
"""

from __future__ import annotations

import re

from reme_service.retrieval.time_rules import (
    SEASON_NAMES,
    Reference,
    Rule,
    date_without_year,
    month_of_year,
    relative_unit,
    rolling,
    season,
    vague_units_ago,
    weekday_date,
)
from reme_service.retrieval.timespan import (
    MONTH_PATTERN,
    MONTH_WORDS,
    WEEKDAY_PATTERN,
    WEEKDAY_WORDS,
    TimeSpan,
    day_span,
    month_span,
    safe_date,
    year_span,
)

NUMBER_WORDS: dict[str, int] = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "couple of": 2,
    "a couple": 2,
}
_NUM = r"(\d{1,3}|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)).replace(" ", r"\s+") + ")"
_UNIT = r"(day|week|weekend|month|year|hour)s?"
_ORD = r"(?:st|nd|rd|th)?"
_SEASON = "(" + "|".join(SEASON_NAMES) + ")"
_I = re.IGNORECASE

FUTURE_RE = re.compile(
    r"\b(?:will|won't|shall|going\s+to|gonna|plan(?:s|ning|ned)?\s+(?:to|on)|about\s+to|next|upcoming|coming\s+up|"
    r"tomorrow|soon|intend(?:s|ing)?\s+to|hope\s+to|can't\s+wait|look(?:ing)?\s+forward)\b|'ll\b",
    _I,
)


def _number(text: str) -> int:
    text = re.sub(r"\s+", " ", text.lower())
    return int(text) if text.isdigit() else NUMBER_WORDS[text]


def _month(word: str) -> int | None:
    """The month a matched word names; None for the verb "may" written in lower case."""
    if word == "may":
        return None
    return MONTH_WORDS[word.lower().rstrip(".")]


def _iso_date(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    day = safe_date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    return day_span(day) if day else None


def _dmy(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    month = _month(m.group(2))
    day = safe_date(int(m.group(3)), month, int(m.group(1))) if month else None
    return day_span(day) if day else None


def _mdy(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    month = _month(m.group(1))
    day = safe_date(int(m.group(3)), month, int(m.group(2))) if month else None
    return day_span(day) if day else None


def _month_year(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    month = _month(m.group(1))
    return month_span(int(m.group(2)), month) if month else None


def _day_month(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    month = _month(m.group(2))
    return date_without_year(ref, month, int(m.group(1))) if month else None


def _month_day(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    month = _month(m.group(1))
    return date_without_year(ref, month, int(m.group(2))) if month else None


def _qualified_month(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    month = _month(m.group(2))
    return month_of_year(ref, month, m.group(1).lower()) if month else None


def _year(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    year = int(m.group(1))
    return year_span(year) if 1900 <= year <= 2100 else None


def _season(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    year = int(m.group(3)) if m.group(3) else None
    return season(ref, m.group(2).lower(), (m.group(1) or "").lower(), year)


def _season_year(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    return season(ref, m.group(1).lower(), "", int(m.group(2)))


_DAY_WORDS = {
    "the day before yesterday": -2,
    "the day after tomorrow": 2,
    "yesterday": -1,
    "last night": -1,
    "today": 0,
    "tonight": 0,
    "earlier today": 0,
    "this morning": 0,
    "this afternoon": 0,
    "this evening": 0,
    "tomorrow": 1,
}


def _day_word(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    return relative_unit(ref, "day", _DAY_WORDS[re.sub(r"\s+", " ", m.group(1).lower())])


def _ago(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    return relative_unit(ref, m.group(2).lower(), -_number(m.group(1)))


def _later(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    count, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    return relative_unit(ref, unit.lower(), _number(count))


def _vague_ago(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    return vague_units_ago(ref, m.group(1).lower())


def _relative_period(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    qualifier, unit = m.group(1).lower(), m.group(2).lower()
    if qualifier == "past" and unit != "weekend":
        return rolling(ref, unit)
    offset = {"last": -1, "previous": -1, "past": -1, "this": 0, "next": 1, "coming": 1}[qualifier]
    return relative_unit(ref, unit, offset)


def _period_before(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    return relative_unit(ref, m.group(1).lower(), -1)


def _weekday(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    qualifier = (m.group(1) or "").lower()
    qualifier = {"past": "last", "coming": "next"}.get(qualifier, qualifier)
    return day_span(weekday_date(ref, WEEKDAY_WORDS[m.group(2).lower()], qualifier))


def _rule(pattern: str, handler: object) -> Rule:
    return Rule(re.compile(pattern, _I), handler)  # type: ignore[arg-type]


RULES: tuple[Rule, ...] = (
    _rule(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", _iso_date),
    _rule(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({MONTH_PATTERN})\.?,?\s+(\d{{4}})\b", _dmy),
    _rule(rf"\b({MONTH_PATTERN})\.?\s+(\d{{1,2}}){_ORD},?\s+(\d{{4}})\b", _mdy),
    _rule(rf"\b({MONTH_PATTERN})\.?,?\s+(?:of\s+)?(\d{{4}})\b", _month_year),
    _rule(rf"\b(?:the\s+)?(\d{{1,2}}){_ORD}\s+(?:of\s+)?({MONTH_PATTERN})\b", _day_month),
    _rule(rf"\b({MONTH_PATTERN})\.?\s+(\d{{1,2}}){_ORD}\b(?![:\d])", _month_day),
    _rule(
        rf"\b(last|this|next|in|during|since|until|by|early|mid|late|of)[\s-]+(?:the\s+month\s+of\s+)?"
        rf"({MONTH_PATTERN})\b(?!\.?,?\s+(?:of\s+)?\d{{4}}|\.?\s+\d{{1,2}}\b)",
        _qualified_month,
    ),
    _rule(r"\b(?:in|since|during|until|by|from|before|after|around|of|year)\s+(\d{4})\b(?!\s*(?:-|/)\d)", _year),
    _rule(
        rf"\b(last|this|next|past|in|during|over|the|early|late|that)\s+(?:the\s+)?{_SEASON}(?:\s+(?:of\s+)?(\d{{4}}))?\b",
        _season,
    ),
    _rule(rf"\b{_SEASON}\s+(?:of\s+)?(\d{{4}})\b", _season_year),
    _rule(r"\b(" + "|".join(w.replace(" ", r"\s+") for w in _DAY_WORDS) + r")\b", _day_word),
    _rule(rf"\b{_NUM}\s+{_UNIT}\s+ago\b", _ago),
    _rule(rf"\bin\s+{_NUM}\s+{_UNIT}(?:'?s?\s+time)?\b|\b{_NUM}\s+{_UNIT}\s+(?:later|from\s+now)\b", _later),
    _rule(r"\b(?:a\s+few|few|several)\s+(day|week|month|year)s\s+ago\b", _vague_ago),
    _rule(r"\b(last|this|next|past|previous|coming)\s+(week|weekend|month|year)\b", _relative_period),
    _rule(r"\bthe\s+(week|weekend|month|year)\s+before\b", _period_before),
    _rule(rf"\b(?:(last|this|next|on|past|coming)\s+)?({WEEKDAY_PATTERN})\b", _weekday),
)
