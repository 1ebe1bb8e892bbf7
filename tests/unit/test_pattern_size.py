"""`pattern_size.expanded_size`: the atoms a regular expression stands for once `regex` expands its counted repeats'
minimums (what compiling it costs), read from the text alone."""

from __future__ import annotations

import pytest

from reme_service.ops.working.pattern_size import expanded_size, turns_on_verbose


@pytest.mark.parametrize(
    ("pattern", "atoms"),
    [
        ("ERROR", 5),
        ("ERROR|WARN", 5),  # the larger branch
        ("a{3}", 3),
        ("a{3,}", 3),
        ("a{3,9}", 3),  # the minimum is what is expanded
        ("a{0,60000}", 1),
        ("a{,5}", 1),
        ("a*b+c?", 3),
        ("(ab|c){2,9}", 4),
        (r"\d{4}-\d{2}-\d{2}", 10),
        (r"\p{L}{4}", 4),  # the braces of \p{...} belong to the escape
        (r"\{5}", 3),  # an escaped brace is no count
        ("[a{}]{5}", 5),  # braces inside a class are members
        ("[]a]{2}", 2),
        ("(?:foo){e<=3}", 10),  # a fuzzy constraint is no count (counted as text)
        ("(?:a{1000}){1000}b", 1_001_001),
        ("((((a{100}){100}){100}){100})", 100_000_000),
        ("(?:x|a{1000}){1000}", 1_000_000),
        ("(a)(b", 2),  # unclosed: counted as it stands (compiling refuses it)
        ("a {3}", 4),  # a space is an atom, and the count repeats it: never less than what is expanded
        ("(?x)((a{100}) {100}) {100}", 1_000_101),  # verbose mode (refused anyway): the counts repeat the groups
        ("((a{100})(?#c){100})(?#c){100}", 1_000_000),  # a comment is invisible: the counts repeat the groups
        ("((a{100})(?i){100}){100}", 1_000_000),  # so are inline flags
        ("((a{100})(?V0-s){100}){100}", 1_000_000),
        ("(?i)abc", 3),
    ],
)
def test_expanded_size(pattern: str, atoms: int) -> None:
    assert expanded_size(pattern) == atoms


@pytest.mark.parametrize(
    ("pattern", "verbose"),
    [("(?x)a b", True), ("(?ix:a)", True), ("(?V1x-s:a)", True), ("(?^x)a", True), ("(?-x:a)", False), ("x)", False)],
)
def test_verbose_mode_is_recognised(pattern: str, verbose: bool) -> None:
    assert turns_on_verbose(pattern) is verbose
