"""The request/response examples of the memory-kind pages in docs/ are run against a live server, so they cannot drift.

A page's examples are pairs of fenced blocks: an `http` block (`POST /<flow>` on its first line, the JSON body
below) and the `json` block right after it, the documented response. Each page runs, top to bottom, on a fresh
server with the default offline setup (no LLM). The documented response is a pattern: every key it shows must be
in the real response with an equal value, lists must have the same length and match item by item, and the string
`"..."` matches any value (ids, times, similarities).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

PAGES = ["task_memory.md", "personal_memory.md", "tool_memory.md", "working_memory.md"]
ANY = "..."
_BLOCK = re.compile(r"```(\w+)[^\n]*\n(.*?)```", re.S)


def parse_examples(text: str) -> list[tuple[str, dict[str, Any], Any]]:
    """(flow, request body, documented response) for every `http` block followed by a `json` block."""
    blocks = [(m.group(1), m.group(2)) for m in _BLOCK.finditer(text)]
    examples = []
    for (kind, body), following in zip(blocks, [*blocks[1:], ("", "")], strict=True):
        if kind != "http":
            continue
        first, _, payload = body.partition("\n")
        match = re.fullmatch(r"POST /(\w+)", first.strip())
        assert match, f"an http example starts with 'POST /<flow>', not {first!r}"
        assert following[0] == "json", f"the example of {first} needs a json response block right after it"
        examples.append((match.group(1), json.loads(payload), json.loads(following[1])))
    return examples


def mismatches(expected: Any, actual: Any, where: str = "$") -> list[str]:
    """Where `actual` departs from the documented pattern `expected` (empty when it matches)."""
    if expected == ANY:
        return []
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        problems = []
        for key, value in expected.items():
            if key not in actual:
                problems.append(f"{where}.{key}: missing")
            else:
                problems += mismatches(value, actual[key], f"{where}.{key}")
        return problems
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: expected {len(expected)} items, got {actual!r}"]
        return [
            p for i, (e, a) in enumerate(zip(expected, actual, strict=True)) for p in mismatches(e, a, f"{where}[{i}]")
        ]
    return [] if expected == actual else [f"{where}: documented {expected!r}, got {actual!r}"]


def test_pattern_matching_is_strict_where_it_should_be() -> None:
    assert mismatches({"a": [1, ANY]}, {"a": [1, {"x": 2}], "b": 3}) == []
    assert mismatches({"a": [1]}, {"a": [1, 2]}) == ["$.a: expected 1 items, got [1, 2]"]
    assert mismatches({"a": "x"}, {"a": "y"}) == ["$.a: documented 'x', got 'y'"]
    assert mismatches({"a": 1}, {}) == ["$.a: missing"]


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run_as_documented(serve: ServeFn, page: str) -> None:
    path = REPO_ROOT / "docs" / page
    examples = parse_examples(path.read_text(encoding="utf-8"))
    assert examples, f"{page} has no examples"
    with serve() as client:
        flows = set(client.get("/health").json()["flows"])
        for number, (flow, body, documented) in enumerate(examples, 1):
            assert flow in flows, f"{page} example {number}: the server has no flow {flow}"
            response = client.post(f"/{flow}", json=body)
            problems = mismatches(documented, response.json())
            assert not problems, f"{page} example {number} (POST /{flow}):\n" + "\n".join(problems)


def test_every_page_is_linked_from_the_docs_index() -> None:
    index = (REPO_ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    for page in PAGES:
        assert f"]({page})" in index, page
        assert Path(REPO_ROOT / "docs" / page).is_file()
