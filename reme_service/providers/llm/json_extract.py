"""Tolerant extraction of JSON from LLM replies, shared by all ops.

LLMs wrap JSON in prose, in Markdown fences, or cut it short. `extract_json` tries, in order, and returns the
first candidate that parses:

1. each ```` ```json ```` fenced block (the tag is case-insensitive);
2. each other fenced block (any tag or none);
3. the whole text;
4. each balanced `{...}` or `[...]` substring, scanning left to right with bracket matching that skips brackets
   inside JSON strings; once a group parses, the scan resumes after it (its inner groups are not candidates).

Parsing is `json.loads(strict=False)` (raw newlines and tabs inside strings are accepted), and a candidate that
fails is tried once more with trailing commas removed (`[1, 2,]`, `{"a": 1,}`).

5. when nothing parses, the text from the first bracket (of the first ```` ```json ```` fence, else of the first
   fence, else of the whole text) is given to `json_repair` — before step 4 when that value never closes and
   nothing follows it (a reply cut short: the mended whole beats a piece of it). It mends what LLMs get wrong:
   missing commas or closing brackets, single or curly quotes, unquoted keys, comments, Python's `True`/`None`.
   Its result counts only when it has structure — a non-empty object, or a non-empty array of objects, arrays
   or numbers — so prose is never turned into a value; otherwise `None`.
   (`cookbook/bench/llm_json_replies.py` measures how many malformed replies this saves a second LLM call.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import json_repair

__all__ = ["extract_json", "extract_json_list", "extract_json_object"]

# An opening fence, its optional info string, the body, then a closing fence or the end of the text (a reply cut
# short by the token limit often lacks the closing fence).
_FENCE_RE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_CLOSERS = {"{": "}", "[": "]"}


def extract_json(text: str, *, repair: bool = True) -> Any | None:
    """The first JSON value found in `text` (see the module docstring for the order), or None."""
    return next(_candidates(text, repair=repair), None)


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object found in `text`, skipping candidates that parse to something else; or None."""
    return next((value for value in _candidates(text) if isinstance(value, dict)), None)


def extract_json_list(text: str, *, unwrap: bool = True) -> list[Any] | None:
    """The first JSON array found in `text`, or None.

    With `unwrap` (the default), an object holding exactly one array value also counts, and that array is returned:
    `{"memories": [...]}` and `{"reasoning": "...", "memories": [...]}` give the list. Objects with no array or with
    several arrays are skipped.
    """
    for value in _candidates(text):
        if isinstance(value, list):
            return value
        if unwrap and isinstance(value, dict):
            lists = [v for v in value.values() if isinstance(v, list)]
            if len(lists) == 1:
                return lists[0]
    return None


def _candidates(text: str, *, repair: bool = True) -> Iterator[Any]:
    """Every parsable candidate, in priority order (lazily: later steps run only when asked for)."""
    if not isinstance(text, str) or not text.strip():
        return
    fences = [(m.group(1).lower(), m.group(2)) for m in _FENCE_RE.finditer(text)]
    for wanted_json in (True, False):
        for tag, body in fences:
            if (tag == "json") == wanted_json:
                ok, value = _parse(body)
                if ok:
                    yield value
    ok, value = _parse(text)
    if ok:
        yield value
    tagged = [body for tag, body in fences if tag == "json"]
    source = (tagged or [body for _, body in fences] or [text])[0]
    starts = [pos for pos in (source.find("{"), source.find("[")) if pos >= 0]
    # its value never closes and nothing but a closing fence follows it: a reply cut short, or a bracket left out
    last = text.rstrip().removesuffix("```").rstrip()
    cut_short = repair and bool(starts) and _match(source, min(starts)) is None and last.endswith(source.rstrip())
    if cut_short:  # mend the whole rather than return a piece of it
        yield from _repaired(source[min(starts) :])
    yield from _balanced_values(text)
    if repair and starts and not cut_short:
        yield from _repaired(source[min(starts) :])


def _repaired(fragment: str) -> Iterator[Any]:
    """`json_repair`'s reading of `fragment`, when it has structure (module docstring, 5)."""
    try:
        value = json_repair.loads(fragment)
    except (ValueError, RecursionError):
        return
    structured = (dict, list, int, float)
    if (isinstance(value, dict) and value) or (
        isinstance(value, list) and value and all(isinstance(v, structured) and not isinstance(v, bool) for v in value)
    ):
        yield value


def _parse(fragment: str) -> tuple[bool, Any]:
    fragment = fragment.strip()
    if not fragment:
        return False, None
    try:
        return True, json.loads(fragment, strict=False)
    except ValueError:
        pass
    repaired = _drop_trailing_commas(fragment)
    if repaired != fragment:
        try:
            return True, json.loads(repaired, strict=False)
        except ValueError:
            pass
    return False, None


def _balanced_values(text: str) -> Iterator[Any]:
    """Each balanced bracket group that parses, left to right; groups inside a parsed one are not revisited."""
    pos = 0
    while pos < len(text):
        if text[pos] in _CLOSERS:
            end = _match(text, pos)
            if end is not None:
                ok, value = _parse(text[pos:end])
                if ok:
                    yield value
                    pos = end
                    continue
        pos += 1


def _match(text: str, start: int) -> int | None:
    """The end (exclusive) of the bracket group opening at `start`, or None when it is unbalanced."""
    stack = [_CLOSERS[text[start]]]
    in_string = False
    escaped = False
    for pos in range(start + 1, len(text)):
        char = text[pos]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in _CLOSERS:
            stack.append(_CLOSERS[char])
        elif char in "}]":
            if char != stack.pop():
                return None
            if not stack:
                return pos + 1
    return None


def _drop_trailing_commas(fragment: str) -> str:
    """Remove commas that directly precede `}` or `]` (ignoring whitespace), outside strings."""
    out: list[str] = []
    in_string = False
    escaped = False
    for pos, char in enumerate(fragment):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == ",":
            nxt = pos + 1
            while nxt < len(fragment) and fragment[nxt].isspace():
                nxt += 1
            if nxt < len(fragment) and fragment[nxt] in "}]":
                continue
        out.append(char)
    return "".join(out)
