"""Time spans: the periods personal memories and queries refer to, and the calendar arithmetic behind them.

A `TimeSpan` is a half-open interval `[start, end)` of naive datetimes (the wall-clock time of the user who
spoke; no time zones), with the text it was read from. Spans are day-aligned except for explicit times.
Stored memories keep spans as `YYYY-MM-DD HH:MM:SS` strings, which sort like the datetimes they spell, so the
store's range filters can select memories whose span overlaps a query's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"

WEEKDAYS_EN = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
WEEKDAYS_ZH = ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日")
MONTHS_EN = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
MONTH_WORDS: dict[str, int] = {
    **{name.lower(): i + 1 for i, name in enumerate(MONTHS_EN)},
    **{name[:3].lower(): i + 1 for i, name in enumerate(MONTHS_EN)},
    "sept": 9,
}
# Longest names first, so `june` wins over `jun`.
MONTH_PATTERN = "(?:" + "|".join(sorted(MONTH_WORDS, key=len, reverse=True)) + ")"
WEEKDAY_WORDS: dict[str, int] = {name.lower(): i for i, name in enumerate(WEEKDAYS_EN)}
WEEKDAY_PATTERN = "(?:" + "|".join(WEEKDAY_WORDS) + ")"
# Meteorological seasons (northern hemisphere): first month and length in months.
SEASONS: dict[str, tuple[int, int]] = {"spring": (3, 3), "summer": (6, 3), "autumn": (9, 3), "winter": (12, 3)}


@dataclass(frozen=True)
class TimeSpan:
    """A period `[start, end)` and the expression it was read from (`text`, may be empty)."""

    start: datetime
    end: datetime
    text: str = ""

    def overlaps(self, start: datetime, end: datetime) -> bool:
        return self.start < end and start < self.end

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end

    def with_text(self, text: str) -> TimeSpan:
        return replace(self, text=text)

    @property
    def label(self) -> str:
        """`2023-05-07` (a day), `2023-05` (a month), `2023` (a year), else `first..last` day, inclusive."""
        start, end = self.start, self.end
        midnight = start.time() == end.time() == datetime.min.time()
        if midnight and end - start == timedelta(days=1):
            return start.strftime("%Y-%m-%d")
        if midnight and start.day == 1 and end == month_start(start.year, start.month + 1):
            return start.strftime("%Y-%m")
        if midnight and (start.month, start.day) == (1, 1) and end == datetime(start.year + 1, 1, 1):
            return str(start.year)
        if midnight:
            return f"{start:%Y-%m-%d}..{end - timedelta(days=1):%Y-%m-%d}"
        return f"{start:%Y-%m-%d %H:%M}..{end:%Y-%m-%d %H:%M}"

    def bounds(self) -> tuple[str, str]:
        """Start and end as stored strings."""
        return self.start.strftime(TIME_FORMAT), self.end.strftime(TIME_FORMAT)

    def to_dict(self) -> dict[str, str]:
        start, end = self.bounds()
        return {"text": self.text, "label": self.label, "start": start, "end": end}


def midnight(moment: datetime | date) -> datetime:
    return datetime(moment.year, moment.month, moment.day)


def day_span(moment: datetime | date, days: int = 1) -> TimeSpan:
    start = midnight(moment)
    return TimeSpan(start, start + timedelta(days=days))


def week_span(moment: datetime | date) -> TimeSpan:
    """The Monday-to-Sunday week containing `moment`."""
    start = midnight(moment) - timedelta(days=moment.weekday())
    return TimeSpan(start, start + timedelta(days=7))


def weekend_span(moment: datetime | date) -> TimeSpan:
    """Saturday and Sunday of the week containing `moment`."""
    start = week_span(moment).start + timedelta(days=5)
    return TimeSpan(start, start + timedelta(days=2))


def month_start(year: int, month: int) -> datetime:
    """The first day of a month; months past 12 or below 1 roll into other years."""
    year += (month - 1) // 12
    return datetime(year, (month - 1) % 12 + 1, 1)


def month_span(year: int, month: int, months: int = 1) -> TimeSpan:
    return TimeSpan(month_start(year, month), month_start(year, month + months))


def year_span(year: int) -> TimeSpan:
    return TimeSpan(datetime(year, 1, 1), datetime(year + 1, 1, 1))


def season_span(year: int, season: str) -> TimeSpan:
    """The season of `year` (winter starts in December of `year`)."""
    first, length = SEASONS[season]
    return month_span(year, first, length)


def season_of(moment: datetime) -> tuple[int, str]:
    """The (year, season) `moment` falls in; January and February belong to the previous year's winter."""
    if moment.month in (1, 2):
        return moment.year - 1, "winter"
    name = next(s for s, (first, _) in SEASONS.items() if first <= moment.month < first + 3)
    return moment.year, name


def shift_months(moment: datetime, months: int) -> datetime:
    """The same day `months` later (clamped to the month's last day)."""
    first = month_start(moment.year, moment.month + months)
    last_day = (month_start(first.year, first.month + 1) - timedelta(days=1)).day
    return first.replace(day=min(moment.day, last_day))


def safe_date(year: int, month: int, day: int) -> datetime | None:
    """A date, or None when the numbers do not make one (31 June)."""
    try:
        return datetime(year, month, day)
    except ValueError:
        return None


def format_moment(moment: datetime, language: str = "") -> str:
    """A moment as prompts show it: `Monday, May 8, 2023, 13:56` or `2023年5月8日 星期一 13:56`."""
    if language == "zh":
        weekday = WEEKDAYS_ZH[moment.weekday()]
        return f"{moment.year}年{moment.month}月{moment.day}日 {weekday} {moment:%H:%M}"
    weekday = WEEKDAYS_EN[moment.weekday()]
    return f"{weekday}, {MONTHS_EN[moment.month - 1]} {moment.day}, {moment.year}, {moment:%H:%M}"


_ISO_PART = r"(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?"
_ANSWER_RE = re.compile(rf"^\s*{_ISO_PART}\s*(?:(?:\.\.|/|~|\bto\b|–|—|至|到)\s*{_ISO_PART})?\s*$", re.IGNORECASE)


def _partial_span(year: str, month: str | None, day: str | None) -> TimeSpan | None:
    y = int(year)
    if not 1 <= y <= 9998:
        return None
    if month is None:
        return year_span(y)
    m = int(month)
    if not 1 <= m <= 12:
        return None
    if day is None:
        return month_span(y, m)
    start = safe_date(y, m, int(day))
    return day_span(start) if start else None


def parse_span_answer(text: str) -> TimeSpan | None:
    """Read a machine-written period: `2023-05-07`, `2023-05`, `2023`, or a range `2023-05-01..2023-05-07`
    (the end inclusive, at the end's own granularity). None for anything else, including `none`."""
    match = _ANSWER_RE.match(text)
    if not match:
        return None
    first = _partial_span(*match.group(1, 2, 3))
    if first is None:
        return None
    if match.group(4) is None:
        return first.with_text(text.strip())
    last = _partial_span(*match.group(4, 5, 6))
    if last is None or last.end <= first.start:
        return None
    return TimeSpan(first.start, last.end, text.strip())
