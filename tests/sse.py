"""Reading a text/event-stream in tests: the next event of an open stream's lines."""

from __future__ import annotations

from collections.abc import Iterator


def next_event(lines: Iterator[str]) -> tuple[str, str]:
    """The next event's (type, data) from `lines` (an httpx `iter_lines()`, kept by the caller: a dropped line
    iterator closes the stream); comment and `retry` lines are skipped. AssertionError when the stream ends."""
    kind, data = "", ""
    for line in lines:
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and kind:
            return kind, data
    raise AssertionError("the stream ended")
