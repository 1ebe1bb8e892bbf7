"""Grep and read over working-memory files: regular expressions, limits, line numbers, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_service.errors import InvalidRequestError, NotFoundError, PathNotAllowedError
from reme_service.ops.working.file_tools import grep_file, read_file
from reme_service.ops.working.paths import WorkingRoot

LOG = "\n".join(
    [
        "2024-05-14 INFO start",
        "2024-05-14 ERROR payment 4711 declined",
        "2024-05-14 info retry (1/3)",
        "2024-05-14 Error payment 4712 timeout",
        "end of log",
    ]
)


@pytest.fixture
def root(tmp_path: Path) -> WorkingRoot:
    folder = (tmp_path / "wm").resolve()
    (folder / "s").mkdir(parents=True)
    (folder / "s" / "log.txt").write_text(LOG + "\n", encoding="utf-8")
    return WorkingRoot(folder)


def test_regex_case_insensitive_with_line_numbers(root: WorkingRoot) -> None:
    result = grep_file(root, "s/log.txt", r"error payment \d+")
    assert result.text.splitlines() == [
        "s/log.txt:2:2024-05-14 ERROR payment 4711 declined",
        "s/log.txt:4:2024-05-14 Error payment 4712 timeout",
    ]
    assert (result.matches, result.truncated, result.path) == (2, False, "s/log.txt")


def test_case_sensitive_literal_and_limit(root: WorkingRoot) -> None:
    assert grep_file(root, "s/log.txt", "ERROR", case_sensitive=True).matches == 1
    # "(1/3)" is a broken group as a regex... and fine as literal text
    literal = grep_file(root, "s/log.txt", "(1/3)", literal=True)
    assert literal.text == "s/log.txt:3:2024-05-14 info retry (1/3)"
    limited = grep_file(root, "s/log.txt", "2024", limit=2)
    assert limited.matches == 2 and limited.truncated is True
    exact = grep_file(root, "s/log.txt", "2024", limit=4)
    assert exact.matches == 4 and exact.truncated is False


def test_absolute_path_inside_the_root_is_shown_relative(root: WorkingRoot) -> None:
    result = grep_file(root, str(root.root / "s" / "log.txt"), "end")
    assert result.text == "s/log.txt:5:end of log"


def test_no_match_says_so(root: WorkingRoot) -> None:
    result = grep_file(root, "s/log.txt", "refund")
    assert result.matches == 0
    assert result.text == 'No matches found for pattern "refund" in file_path "s/log.txt".'


def test_long_lines_are_shortened(root: WorkingRoot) -> None:
    (root.root / "long.txt").write_text("needle " + "x" * 5000)
    result = grep_file(root, "long.txt", "needle", max_line_chars=100)
    assert result.text.endswith("... (5007 characters in all)")
    assert len(result.text) < 200


def test_undecodable_bytes_do_not_fail(root: WorkingRoot) -> None:
    (root.root / "bin.txt").write_bytes(b"ok line\n\xff\xfe broken needle\n")
    assert grep_file(root, "bin.txt", "needle").matches == 1


def test_grep_errors(root: WorkingRoot) -> None:
    with pytest.raises(NotFoundError):
        grep_file(root, "s/missing.txt", "x")
    with pytest.raises(InvalidRequestError, match="invalid regular expression"):
        grep_file(root, "s/log.txt", "(unclosed")
    with pytest.raises(InvalidRequestError, match="not a file"):
        grep_file(root, "s", "x")
    with pytest.raises(InvalidRequestError, match="pattern must not be empty"):
        grep_file(root, "s/log.txt", "")
    with pytest.raises(PathNotAllowedError):
        grep_file(root, "../../etc/passwd", "root")
    with pytest.raises(PathNotAllowedError):
        grep_file(root, "/etc/passwd", "root")


def test_read_offset_and_limit(root: WorkingRoot) -> None:
    result = read_file(root, "s/log.txt", offset=1, limit=2)
    assert result.text == "2024-05-14 ERROR payment 4711 declined\n2024-05-14 info retry (1/3)"
    assert (result.start_line, result.lines, result.has_more) == (2, 2, True)
    tail = read_file(root, "s/log.txt", offset=3)
    assert tail.text.splitlines() == ["2024-05-14 Error payment 4712 timeout", "end of log"]
    assert tail.has_more is False
    assert read_file(root, "s/log.txt").text == LOG


def test_read_errors(root: WorkingRoot) -> None:
    with pytest.raises(InvalidRequestError, match="offset 5 is past the end of 's/log.txt', which has 5 lines"):
        read_file(root, "s/log.txt", offset=5, limit=10)
    with pytest.raises(NotFoundError):
        read_file(root, "nothing.txt")
    with pytest.raises(InvalidRequestError):
        read_file(root, "s/log.txt", offset=-1)
    with pytest.raises(PathNotAllowedError):
        read_file(root, "s/../../outside.txt")
    (root.root / "empty.txt").write_text("")
    assert read_file(root, "empty.txt").text == ""


# ----- the time budget of a client's pattern -----

BOMB = r"(a|a)+$"  # overlapping alternatives: every extra "a" doubles the backtracking before "!" fails it


@pytest.mark.timeout(60)  # unbounded, the search of line 2 takes hours: the test fails here instead of hanging
def test_a_backtracking_pattern_is_a_400_within_its_budget(root: WorkingRoot) -> None:
    (root.root / "bomb.txt").write_text("no a here\n" + "a" * 30 + "!\n", encoding="utf-8")
    with pytest.raises(InvalidRequestError, match=r"took longer than 0\.2 s .*line 2.*simplify it"):
        grep_file(root, "bomb.txt", BOMB, timeout=0.2)


def test_the_budget_is_for_all_lines_together(root: WorkingRoot) -> None:
    """No line alone exceeds the budget; together they do."""
    line = "a" * 12 + "!\n"
    (root.root / "one.txt").write_text(line, encoding="utf-8")
    (root.root / "many.txt").write_text(line * 5000, encoding="utf-8")
    # one line takes milliseconds and all of them ~10 s: a 1 s budget holds on a busy machine and trips all the same
    assert grep_file(root, "one.txt", BOMB, timeout=1.0).matches == 0
    with pytest.raises(InvalidRequestError, match=r"took longer than 1(\.0)? s"):
        grep_file(root, "many.txt", BOMB, timeout=1.0)


def test_the_pattern_of_the_report_no_longer_backtracks(root: WorkingRoot) -> None:
    """`(a+)+$` on 27 characters held `re` for 9 s; `regex` sees through the nesting and answers at once."""
    (root.root / "report.txt").write_text("a" * 27 + "!\n" + "a" * 27 + "\n", encoding="utf-8")
    result = grep_file(root, "report.txt", r"(a+)+$", timeout=0.5)
    assert result.text == "report.txt:2:" + "a" * 27


def test_python_re_syntax_still_works(root: WorkingRoot) -> None:
    assert grep_file(root, "s/log.txt", r"(?P<code>\d{4}) (?:declined|timeout)$").matches == 2
    assert grep_file(root, "s/log.txt", r"(?<=payment )4712\b").matches == 1
    assert grep_file(root, "s/log.txt", r"(?-i:Error)", case_sensitive=False).matches == 1
    assert grep_file(root, "s/log.txt", r"[(]1/3[)]").matches == 1
