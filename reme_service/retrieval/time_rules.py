"""What the English and Chinese time-expression rules share: rule records and calendar resolution.

A rule is a compiled pattern and a handler turning a match into a `TimeSpan` (or None to reject the match)
given a `Reference`: the moment the text was said and whether the sentence speaks about the future, which
decides the direction of expressions such as "on Friday" or "in August".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from reme_service.retrieval.timespan import (
    SEASONS,
    TimeSpan,
    day_span,
    midnight,
    month_span,
    safe_date,
    season_of,
    season_span,
    shift_months,
    week_span,
    weekend_span,
    year_span,
)


@dataclass(frozen=True)
class Reference:
    """The moment a text was written and whether it talks about what is still to come."""

    moment: datetime
    future: bool = False


Handler = Callable[[re.Match[str], Reference], TimeSpan | None]


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    handler: Handler


def unit_span(moment: datetime, unit: str) -> TimeSpan:
    """The day, week, weekend, month or year containing `moment`."""
    if unit == "week":
        return week_span(moment)
    if unit == "weekend":
        return weekend_span(moment)
    if unit == "month":
        return month_span(moment.year, moment.month)
    if unit == "year":
        return year_span(moment.year)
    return day_span(moment)


def shift(moment: datetime, unit: str, count: int) -> datetime:
    """`moment` moved by `count` units (negative: into the past)."""
    if unit in ("week", "weekend"):
        return moment + timedelta(weeks=count)
    if unit == "month":
        return shift_months(moment, count)
    if unit == "year":
        return shift_months(moment, 12 * count)
    if unit == "hour":
        return moment + timedelta(hours=count)
    return moment + timedelta(days=count)


def relative_unit(ref: Reference, unit: str, count: int) -> TimeSpan:
    """The unit `count` units away from the reference ("2 weeks ago": count -2)."""
    if unit == "hour":
        return day_span(shift(ref.moment, unit, count))
    return unit_span(shift(ref.moment, unit, count), unit)


def vague_units_ago(ref: Reference, unit: str) -> TimeSpan:
    """For "a few weeks ago": from five units back to the end of the unit two back."""
    return TimeSpan(relative_unit(ref, unit, -5).start, relative_unit(ref, unit, -2).end)


def rolling(ref: Reference, unit: str) -> TimeSpan:
    """For "the past week": from one unit before the reference to the end of its day."""
    end = day_span(ref.moment).end
    return TimeSpan(midnight(shift(ref.moment, unit, -1)), end)


def weekday_date(ref: Reference, weekday: int, qualifier: str) -> datetime:
    """The date of `weekday` (0 = Monday) that "last / next / this / bare" names, read from the reference."""
    today = midnight(ref.moment)
    back = (today.weekday() - weekday) % 7
    ahead = (weekday - today.weekday()) % 7
    if qualifier == "last":
        return today - timedelta(days=back or 7)
    if qualifier == "next":
        return today + timedelta(days=ahead or 7)
    if qualifier == "this":
        return week_span(today).start + timedelta(days=weekday)
    return today + timedelta(days=ahead) if ref.future else today - timedelta(days=back)


def week_weekday_date(ref: Reference, weeks: int, weekday: int) -> datetime:
    """The `weekday` of the week `weeks` away from the reference's week (上周五: weeks -1)."""
    return week_span(ref.moment).start + timedelta(weeks=weeks, days=weekday)


def month_of_year(ref: Reference, month: int, qualifier: str) -> TimeSpan:
    """The month named without a year: "last May", "next May", "this May", or bare (the direction decides)."""
    now = ref.moment.month
    year = ref.moment.year
    if qualifier == "last":
        year -= 0 if month < now else 1
    elif qualifier == "next":
        year += 0 if month > now else 1
    elif qualifier != "this":
        if ref.future and month < now:
            year += 1
        elif not ref.future and month > now:
            year -= 1
    return month_span(year, month)


def date_without_year(ref: Reference, month: int, day: int) -> TimeSpan | None:
    """A day and month without a year: the nearest such date in the sentence's direction."""
    year = ref.moment.year
    candidate = safe_date(year, month, day)
    if candidate is None:
        return None
    slack = timedelta(days=1)
    if ref.future and candidate < ref.moment - slack:
        candidate = safe_date(year + 1, month, day)
    elif not ref.future and candidate > ref.moment + slack:
        candidate = safe_date(year - 1, month, day)
    return day_span(candidate) if candidate else None


def season(ref: Reference, name: str, qualifier: str, year: int | None = None) -> TimeSpan:
    """A season: with a year, that year's; otherwise "last / this / next" or the direction decide."""
    name = "autumn" if name == "fall" else name
    if year is not None:
        return season_span(year, name)
    now = ref.moment
    candidates = [season_span(y, name) for y in range(now.year - 2, now.year + 2)]
    if qualifier == "this":
        current_year, current = season_of(now)
        return season_span(current_year if current == name else now.year, name)
    if qualifier == "last":
        return max((s for s in candidates if s.end <= now), key=lambda s: s.start)
    if qualifier == "next":
        return min((s for s in candidates if s.start > now), key=lambda s: s.start)
    if ref.future:
        return min((s for s in candidates if s.end > now), key=lambda s: s.start)
    return max((s for s in candidates if s.start <= now), key=lambda s: s.start)


SEASON_NAMES = (*SEASONS, "fall")


def find_spans(text: str, rules: tuple[Rule, ...], ref: Reference) -> list[tuple[int, int, TimeSpan]]:
    """Every rule's matches as (start, end, span); the caller picks non-overlapping ones."""
    found: list[tuple[int, int, TimeSpan]] = []
    for rule in rules:
        for match in rule.pattern.finditer(text):
            span = rule.handler(match, ref)
            if span is not None:
                found.append((match.start(), match.end(), span.with_text(match.group(0).strip())))
    return found
