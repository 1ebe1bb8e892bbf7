"""Chinese time expressions, read against the moment they were said.

Covered: 2023年5月8日 / 2023年5月 / 2023年 (digits or Chinese numerals, 日 or 号); 5月8号 and 五月 without a year;
去年 / 今年 / 明年 / 前年 / 后年, also before a month (去年五月) or a season (去年夏天); 今天 / 昨天 / 前天 /
明天 / 后天 (and 昨晚, 今早, ...); 上周 / 这周 / 下周 (周, 星期, 礼拜), with a weekday (上周五 is the Friday of last
week) or alone; 周末; 上个月 / 这个月 / 下个月; N天前 / N个月后 and the like (半年前: six months); seasons.
Bare weekdays, months and seasons point backwards unless the sentence speaks about the future (要, 将, 打算, ...).
"""

from __future__ import annotations

import re

from reme_service.retrieval.time_rules import (
    Reference,
    Rule,
    date_without_year,
    month_of_year,
    relative_unit,
    season,
    vague_units_ago,
    week_weekday_date,
    weekday_date,
)
from reme_service.retrieval.timespan import TimeSpan, day_span, month_span, safe_date, year_span

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_NUM_CHARS = "[0-9零〇一二两三四五六七八九十]"
_NUM = r"([0-9]{1,4}|[零〇一二两三四五六七八九十]{1,4})"
_YEAR = r"([0-9]{4}|[零〇一二三四五六七八九]{4})"
_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "1": 0, "2": 1, "3": 2}
_WEEKDAY.update({"4": 3, "5": 4, "6": 5, "7": 6})
_WEEK_PREFIX = {"上上": -2, "上": -1, "这": 0, "本": 0, "今": 0, "下": 1, "下下": 2}
_YEAR_WORDS = {"前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2}
_DAY_WORDS = {
    "大前天": -3,
    "前天": -2,
    "昨天": -1,
    "昨日": -1,
    "昨晚": -1,
    "昨儿": -1,
    "今天": 0,
    "今日": 0,
    "今晚": 0,
    "今早": 0,
    "今儿": 0,
    "明天": 1,
    "明日": 1,
    "明晚": 1,
    "后天": 2,
    "大后天": 3,
}
_UNITS = {"天": "day", "日": "day", "周": "week", "星期": "week", "个星期": "week", "礼拜": "week", "个礼拜": "week"}
_UNITS.update({"月": "month", "个月": "month", "年": "year", "小时": "hour", "个小时": "hour"})
_SEASONS = {"春": "spring", "夏": "summer", "秋": "autumn", "冬": "winter"}

FUTURE_RE = re.compile(r"要|将|会|打算|计划|准备|想去|明天|明年|下周|下个|下星期|以后|之后|即将|马上|快要")


def chinese_number(text: str) -> int:
    """`12`, `十二`, `二十三`, `三十一`, `两`; year-like digit strings `二〇二三` read digit by digit."""
    if text.isdigit():
        return int(text)
    if "十" not in text:
        value = 0
        for char in text:
            value = value * 10 + _DIGITS[char]
        return value
    tens, _, ones = text.partition("十")
    return (_DIGITS[tens] if tens else 1) * 10 + (_DIGITS[ones] if ones else 0)


def _year_of(word: str, ref: Reference) -> int:
    return ref.moment.year + _YEAR_WORDS[word] if word in _YEAR_WORDS else chinese_number(word)


def _full_date(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    day = safe_date(_year_of(m.group(1), ref), chinese_number(m.group(2)), chinese_number(m.group(3)))
    return day_span(day) if day else None


def _year_month(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    month = chinese_number(m.group(2))
    return month_span(_year_of(m.group(1), ref), month) if 1 <= month <= 12 else None


def _month_day(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    month, day = chinese_number(m.group(1)), chinese_number(m.group(2))
    return date_without_year(ref, month, day) if 1 <= month <= 12 else None


def _month(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    month = chinese_number(m.group(1))
    return month_of_year(ref, month, "") if 1 <= month <= 12 else None


def _year(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    year = _year_of(m.group(1), ref)
    return year_span(year) if 1900 <= year <= 2100 else None


def _day_word(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    return relative_unit(ref, "day", _DAY_WORDS[m.group(1)])


def _week_weekday(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    weekday = _WEEKDAY[m.group(2)]
    if m.group(1):
        return day_span(week_weekday_date(ref, _WEEK_PREFIX[m.group(1)], weekday))
    return day_span(weekday_date(ref, weekday, ""))


def _week(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    return relative_unit(ref, "weekend" if m.group(2) else "week", _WEEK_PREFIX[m.group(1) or "这"])


def _relative_month(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    return relative_unit(ref, "month", _WEEK_PREFIX[m.group(1)])


def _ago_later(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    amount, unit, direction = m.group(1), _UNITS[m.group(2)], -1 if "前" in m.group(3) else 1
    if amount == "几":
        return vague_units_ago(ref, unit) if direction < 0 else None
    if amount == "半":
        if unit != "year":
            return None
        amount, unit = "6", "month"
    return relative_unit(ref, unit, direction * chinese_number(amount))


def _season(m: re.Match[str], ref: Reference) -> TimeSpan | None:
    name = _SEASONS[m.group(2)]
    if not m.group(1):
        return season(ref, name, "")
    year = _year_of(m.group(1), ref)
    if name == "winter" and m.group(1) == "今年" and ref.moment.month < 3:
        year -= 1  # in January, 今年冬天 is the winter that began last December
    return season(ref, name, "", year)


def _rule(pattern: str, handler: object) -> Rule:
    return Rule(re.compile(pattern), handler)  # type: ignore[arg-type]


_YEAR_OR_WORD = "(" + _YEAR[1:-1] + "|" + "|".join(_YEAR_WORDS) + ")"
_UNIT_PATTERN = "(" + "|".join(sorted(_UNITS, key=len, reverse=True)) + ")"
_PREFIX = "(上上|下下|上|这|本|下|今)"

RULES: tuple[Rule, ...] = (
    _rule(rf"{_YEAR_OR_WORD}年?的?{_NUM}月{_NUM}[日号]", _full_date),
    _rule(rf"{_YEAR_OR_WORD}年?的?{_NUM}月(?:份)?", _year_month),
    _rule(rf"(?<![0-9零〇一二两三四五六七八九十个上下这本])(?<!每){_NUM}月{_NUM}[日号]", _month_day),
    _rule(rf"(?<![0-9零〇一二两三四五六七八九十个上下这本年每]){_NUM}月份?(?!{_NUM_CHARS}|[日号])", _month),
    _rule(rf"{_YEAR}年(?![0-9零〇一二两三四五六七八九十]+月)", _year),
    _rule(r"(前年|去年|今年|明年|后年)(?![0-9零〇一二两三四五六七八九十]+月|的?[春夏秋冬])", _year),
    _rule("(" + "|".join(sorted(_DAY_WORDS, key=len, reverse=True)) + ")", _day_word),
    _rule(r"(?<!每)(上上|下下|上|这|本|下)?个?(?:周|星期|礼拜)([一二三四五六日天1-7])(?![次遍])", _week_weekday),
    _rule(rf"{_PREFIX}个?(?:周|星期|礼拜)(末)?(?![一二三四五六日天1-7])", _week),
    _rule(rf"(?<!每){_PREFIX}?个?(?:周|星期|礼拜)(末)", _week),
    _rule(r"(上上|下下|上|这|本|下)个?月(?!\d)", _relative_month),
    _rule(rf"([0-9]+|[一二两三四五六七八九十]+|几|半){_UNIT_PATTERN}(以前|之前|前|以后|之后|后)", _ago_later),
    _rule(r"(前年|去年|今年|明年|后年)?的?([春夏秋冬])(?:天|季)", _season),
)
