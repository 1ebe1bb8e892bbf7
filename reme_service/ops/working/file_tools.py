"""Grep and read for working-memory files, in Python (no subprocess), confined to the working-memory root.

Both work on any `state.interfaces.WorkingFiles` (a folder of this machine's disk, or the PostgreSQL table every
node shares), which hands over a file's lines, and report failures as errors instead of an empty success: a
missing file is `NotFoundError` (404), a folder or a bad regular expression `InvalidRequestError` (400), a path
outside the root `PathNotAllowedError` (403). Files are read as UTF-8 with undecodable bytes replaced, line by
line, so large files on disk are streamed.

Patterns come from clients (and from LLMs), so matching has a time budget: the `regex` package (Python `re`
syntax, `regex.V0`) stops a search when its `timeout` runs out, inside the matcher, so a catastrophically
backtracking pattern such as `(a|a)+$` costs at most `timeout` seconds of matching per grep and then fails with
400; the thread that ran it is free again (a `re` match cannot be interrupted at all). Searches run with
`concurrent=True` (regex's default for `str`, spelled out): the GIL is released while matching, so other threads
and the event loop keep running. Compiling cannot be stopped, so a pattern whose counted repeats would expand
past `pattern_size.MAX_EXPANDED_ATOMS` is refused (400) before it is compiled.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import regex

from reme_service.errors import InvalidRequestError
from reme_service.ops.working.pattern_size import MAX_EXPANDED_ATOMS, expanded_size, turns_on_verbose
from reme_service.state.interfaces import WorkingFiles

MAX_PATTERN_CHARS = 1000
DEFAULT_GREP_TIMEOUT = 1.0  # seconds of matching a grep may spend in all
NO_MATCH = 'No matches found for pattern "{pattern}" in file_path "{path}".'


def compile_pattern(pattern: str, *, literal: bool, case_sensitive: bool) -> regex.Pattern[str]:
    if not pattern:
        raise InvalidRequestError("pattern must not be empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidRequestError(f"pattern is longer than {MAX_PATTERN_CHARS} characters")
    if not literal and turns_on_verbose(pattern):
        raise InvalidRequestError("verbose mode ((?x)) is not supported in patterns; write the pattern without it")
    if not literal and (size := expanded_size(pattern)) > MAX_EXPANDED_ATOMS:
        raise InvalidRequestError(
            f"pattern is too large once its counted repeats are expanded ({size:,} atoms, at most "
            f"{MAX_EXPANDED_ATOMS:,}): nested counts multiply; use smaller counts, or * and + (which expand nothing)"
        )
    flags = regex.V0 if case_sensitive else regex.V0 | regex.IGNORECASE
    try:
        return regex.compile(regex.escape(pattern) if literal else pattern, flags)
    except regex.error as exc:
        raise InvalidRequestError(
            f"invalid regular expression {pattern!r}: {exc} (pass literal=true to search for the text as is)"
        ) from None


@dataclass(frozen=True)
class GrepResult:
    text: str
    matches: int
    truncated: bool
    path: str


def grep_file(
    root: WorkingFiles,
    file_path: str,
    pattern: str,
    *,
    limit: int = 50,
    literal: bool = False,
    case_sensitive: bool = False,
    max_line_chars: int = 2000,
    timeout: float = DEFAULT_GREP_TIMEOUT,
) -> GrepResult:
    """Matching lines as `<path>:<line number>:<line>` (1-based; at most `limit`; long lines shortened).

    The searches may take `timeout` seconds in all (reading the file is not counted); past it, 400."""
    compiled = compile_pattern(pattern, literal=literal, case_sensitive=case_sensitive)
    lines: list[str] = []
    truncated = False
    left = timeout
    with root.lines(file_path) as (shown, handle):
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\n")
            started = time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                found = compiled.search(line, timeout=left, concurrent=True)
            except TimeoutError:
                raise InvalidRequestError(
                    f"the pattern took longer than {timeout:g} s to search {shown!r} (stopped at line {number}); "
                    "simplify it: nested or overlapping repetition such as (a+)+ or (a|a)+ backtracks exponentially"
                ) from None
            left -= time.monotonic() - started
            if found is None:
                continue
            if len(lines) >= limit:
                truncated = True
                break
            if len(line) > max_line_chars:
                line = f"{line[:max_line_chars]}... ({len(line)} characters in all)"
            lines.append(f"{shown}:{number}:{line}")
    text = "\n".join(lines) if lines else NO_MATCH.format(pattern=pattern, path=shown)
    return GrepResult(text=text, matches=len(lines), truncated=truncated, path=shown)


@dataclass(frozen=True)
class ReadResult:
    text: str
    start_line: int
    lines: int
    has_more: bool
    path: str


def read_file(root: WorkingFiles, file_path: str, *, offset: int = 0, limit: int = 0) -> ReadResult:
    """Lines `offset+1 … offset+limit` (0-based `offset`; `limit` 0 = to the end), joined by newlines.

    An `offset` past the last line is a 400 that says how many lines the file has.
    """
    if offset < 0 or limit < 0:
        raise InvalidRequestError("offset and limit must be >= 0")
    with root.lines(file_path) as (shown, handle):
        skipped = sum(1 for _ in itertools.islice(handle, offset))
        selected = [line.rstrip("\n") for line in itertools.islice(handle, limit or None)]
        has_more = next(handle, None) is not None
    if not selected and offset > 0:
        raise InvalidRequestError(f"offset {offset} is past the end of {shown!r}, which has {skipped} lines")
    return ReadResult(
        text="\n".join(selected), start_line=offset + 1, lines=len(selected), has_more=has_more, path=shown
    )
