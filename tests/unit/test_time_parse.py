"""The time parser (`reme_service/retrieval`): timestamps, English and Chinese time expressions, period answers."""

from __future__ import annotations

from datetime import datetime

import pytest

from reme_service.retrieval.time_expressions import asks_about_time, find_time_spans, has_time_word
from reme_service.retrieval.timespan import TimeSpan, format_moment, parse_span_answer
from reme_service.retrieval.timestamps import normalise_timestamp, parse_timestamp

MONDAY = datetime(2023, 5, 8, 13, 56)  # Monday, 8 May 2023


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2023-05-08 13:56:07", "2023-05-08 13:56:07"),
        ("2023-05-08", "2023-05-08 00:00:00"),
        ("2023-05-08 13:56", "2023-05-08 13:56:00"),
        ("2023-05-08T13:56:07.250Z", "2023-05-08 13:56:07"),
        ("2023-05-08T13:56:07+08:00", "2023-05-08 13:56:07"),
        ("2023/5/8", "2023-05-08 00:00:00"),
        ("1:56 pm on 8 May, 2023", "2023-05-08 13:56:00"),
        ("10:37 am on 27 June, 2023", "2023-06-27 10:37:00"),
        ("12:05 am on 1 January, 2024", "2024-01-01 00:05:00"),
        ("May 8, 2023 13:56", "2023-05-08 13:56:00"),
        ("Monday, 8th May 2023", "2023-05-08 00:00:00"),
        ("2023年5月8日 13:56", "2023-05-08 13:56:00"),
        ("2023年5月8号 下午1点56分", "2023-05-08 13:56:00"),
        ("2023年5月8日 星期一 上午9点半", "2023-05-08 09:30:00"),
    ],
)
def test_timestamps_are_read(value: str, expected: str) -> None:
    assert normalise_timestamp(value) == expected


def test_epoch_seconds_and_milliseconds_are_local_time() -> None:
    moment = datetime(2023, 5, 8, 13, 56, 7)
    seconds = moment.timestamp()
    assert parse_timestamp(seconds) == moment
    assert parse_timestamp(int(seconds)) == moment
    assert parse_timestamp(str(int(seconds * 1000))) == moment


@pytest.mark.parametrize(
    "value",
    [
        "",
        "yesterday",
        "next friday",
        "2023-13-01",
        "2023-02-30",
        "31 June 2023",
        "8 May 2023 25:00",
        "banana 8 May 2023",
        "8 May 2023 and some words",
        "13:56",
        None,
        True,
        [2023, 5, 8],
    ],
)
def test_bad_timestamps_are_refused_with_the_accepted_forms(value: object) -> None:
    with pytest.raises(ValueError, match="2023-05-08 13:56:00"):
        parse_timestamp(value)


def _labels(text: str, moment: datetime = MONDAY) -> list[tuple[str, str]]:
    return [(span.text, span.label) for span in find_time_spans(text, moment)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went to a support group yesterday.", [("yesterday", "2023-05-07")]),
        ("the day before yesterday we met", [("the day before yesterday", "2023-05-06")]),
        ("this morning I ran", [("this morning", "2023-05-08")]),
        ("I ran a charity race last Saturday", [("last Saturday", "2023-05-06")]),
        ("I went there on Friday", [("on Friday", "2023-05-05")]),
        ("I will go there on Friday", [("on Friday", "2023-05-12")]),
        ("next Tuesday", [("next Tuesday", "2023-05-09")]),
        ("I gave a talk last week", [("last week", "2023-05-01..2023-05-07")]),
        ("the week before was hard", [("the week before", "2023-05-01..2023-05-07")]),
        ("two weekends ago I camped", [("two weekends ago", "2023-04-29..2023-04-30")]),
        ("we go camping next month", [("next month", "2023-06")]),
        ("I painted it last year", [("last year", "2022")]),
        ("I signed up 2 days ago", [("2 days ago", "2023-05-06")]),
        ("my 18th birthday was ten years ago", [("ten years ago", "2013")]),
        ("I leave in 3 weeks", [("in 3 weeks", "2023-05-29..2023-06-04")]),
        ("a few weeks ago", [("a few weeks ago", "2023-04-03..2023-04-30")]),
        ("I was in Paris on 28 January 2023", [("28 January 2023", "2023-01-28")]),
        ("March 3, 2021 was cold", [("March 3, 2021", "2021-03-03")]),
        ("In May 2023 I moved", [("May 2023", "2023-05")]),
        ("in August I travelled", [("in August", "2022-08")]),
        ("in August I will travel", [("in August", "2023-08")]),
        ("last December", [("last December", "2022-12")]),
        ("the 8th of May", [("the 8th of May", "2023-05-08")]),
        ("I started in 2016", [("in 2016", "2016")]),
        ("last summer", [("last summer", "2022-06-01..2022-08-31")]),
        ("in the summer of 2021", [("in the summer of 2021", "2021-06-01..2021-08-31")]),
        ("2023-04-01 was fun", [("2023-04-01", "2023-04-01")]),
        ("I may go there", []),
        ("I have had these friends for 4 years", []),
        ("yesterday I ran, and tomorrow I rest", [("yesterday", "2023-05-07"), ("tomorrow", "2023-05-09")]),
    ],
)
def test_english_expressions(text: str, expected: list[tuple[str, str]]) -> None:
    assert _labels(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我昨天去了医院", [("昨天", "2023-05-07")]),
        ("前天下雨", [("前天", "2023-05-06")]),
        ("上周五我们去爬山", [("上周五", "2023-05-05")]),
        ("上周很忙", [("上周", "2023-05-01..2023-05-07")]),
        ("我打算周六去看电影", [("周六", "2023-05-13")]),
        ("这周末在家", [("这周末", "2023-05-13..2023-05-14")]),
        ("上个月", [("上个月", "2023-04")]),
        ("下个月我要去上海", [("下个月", "2023-06")]),
        ("去年夏天我去了北京", [("去年夏天", "2022-06-01..2022-08-31")]),
        ("去年五月", [("去年五月", "2022-05")]),
        ("2023年5月8日我搬家了", [("2023年5月8日", "2023-05-08")]),
        ("二〇二二年三月", [("二〇二二年三月", "2022-03")]),
        ("五月八号是我生日", [("五月八号", "2023-05-08")]),
        ("三天前我感冒了", [("三天前", "2023-05-05")]),
        ("两个星期前", [("两个星期前", "2023-04-24..2023-04-30")]),
        ("半年前我换了工作", [("半年前", "2022-11")]),
        ("我每周一去健身", []),
        ("周围很安静", []),
        ("三个月都没见", []),
    ],
)
def test_chinese_expressions(text: str, expected: list[tuple[str, str]]) -> None:
    assert _labels(text) == expected


def test_expressions_are_read_against_the_given_moment_not_now() -> None:
    assert _labels("yesterday", datetime(2021, 1, 1, 9)) == [("yesterday", "2020-12-31")]
    assert _labels("昨天", datetime(2021, 1, 1, 9)) == [("昨天", "2020-12-31")]


def test_time_words_and_time_questions() -> None:
    assert has_time_word("I like coffee in the morning")
    assert has_time_word("我昨天喝了咖啡")
    assert has_time_word("We met in 2019")
    assert not has_time_word("I like coffee")
    assert not has_time_word("I may like coffee")
    assert not has_time_word("I am a nurse and sat down")
    assert has_time_word("We meet at 3 pm") and has_time_word("The call is at 14:30") and has_time_word("In May")
    assert asks_about_time("When did Caroline go to the support group?")
    assert asks_about_time("How long ago was her birthday?")
    assert asks_about_time("卡罗琳什么时候去的？")
    assert not asks_about_time("Who supports Caroline when she has a bad day?")
    assert not asks_about_time("What does Caroline like?")


@pytest.mark.parametrize(
    ("answer", "label"),
    [
        ("2023-05-07", "2023-05-07"),
        ("2023-05", "2023-05"),
        ("2023", "2023"),
        ("2023-05-01..2023-05-07", "2023-05-01..2023-05-07"),
        ("2023-03 to 2023-05", "2023-03-01..2023-05-31"),
    ],
)
def test_period_answers(answer: str, label: str) -> None:
    span = parse_span_answer(answer)
    assert span is not None and span.label == label


@pytest.mark.parametrize("answer", ["none", "", "last week", "2023-13", "2023-05-07..2023-05-01", "2023-02-30"])
def test_period_answers_that_are_not_periods(answer: str) -> None:
    assert parse_span_answer(answer) is None


def test_spans_overlap_half_open() -> None:
    day = TimeSpan(datetime(2023, 5, 7), datetime(2023, 5, 8))
    assert day.overlaps(datetime(2023, 5, 1), datetime(2023, 5, 8))
    assert not day.overlaps(datetime(2023, 5, 8), datetime(2023, 5, 9))
    assert day.contains(datetime(2023, 5, 7, 23, 59))
    assert not day.contains(datetime(2023, 5, 8))


def test_format_moment_in_both_languages() -> None:
    assert format_moment(MONDAY) == "Monday, May 8, 2023, 13:56"
    assert format_moment(MONDAY, "zh") == "2023年5月8日 星期一 13:56"


def test_the_rules_read_at_most_max_time_text_characters() -> None:
    """A long text costs the rules at most MAX_TIME_TEXT characters (~2 µs each): a period named past them is not
    read, one inside them is."""
    from reme_service.retrieval.time_expressions import MAX_TIME_TEXT

    filler = "x " * (MAX_TIME_TEXT // 2)  # exactly MAX_TIME_TEXT characters without a time word
    inside = filler[: MAX_TIME_TEXT - 20] + " yesterday " + filler
    past = filler + " yesterday " + filler
    assert [s.text for s in find_time_spans(inside, MONDAY)] == ["yesterday"] and has_time_word(inside)
    assert find_time_spans(past, MONDAY) == [] and not has_time_word(past)


@pytest.mark.anyio
async def test_a_long_query_is_read_in_the_regex_lane_and_a_short_one_inline() -> None:
    """`off_loop_for` decides where the ops read a query's time: a query of INLINE_TIME_TEXT characters or fewer is
    read on the caller's thread (a thread hop would cost more than the rules), a longer one in the lane's thread."""
    import threading

    from reme_service.concurrency import ThreadLane
    from reme_service.retrieval.time_expressions import INLINE_TIME_TEXT, off_loop_for

    def where(text: str, moment: datetime) -> tuple[str, list[tuple[str, str]]]:
        return threading.current_thread().name, _labels(text, moment)

    lane = ThreadLane("reme-test-time-lane", 1)
    try:
        loop_thread = threading.current_thread().name
        short = "what did I do yesterday?"
        long = short + " " + "x" * (INLINE_TIME_TEXT - len(short))
        inline_thread, inline_spans = await off_loop_for(lane, where, short, MONDAY)
        lane_thread, lane_spans = await off_loop_for(lane, where, long, MONDAY)
        edge_thread, _ = await off_loop_for(lane, where, long[:INLINE_TIME_TEXT], MONDAY)
        assert inline_thread == loop_thread == edge_thread
        assert lane_thread.startswith("reme-test-time-lane")
        assert lane_spans == inline_spans and inline_spans  # the same reading wherever it runs
    finally:
        await lane.close()
