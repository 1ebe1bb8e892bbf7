"""How many malformed LLM replies are read without asking the LLM again, with and without `json_repair`.

The corpus is the kinds of broken JSON the service's ops get from LLMs (and that its tests script): a missing
comma or bracket, a reply cut short by the token limit, Python-style quotes and literals, unquoted keys, comments,
prose around it all. Each case carries the value a careful reader would take from it; a case counts as recovered
when `extract_json` returns exactly that value (a wrong value would be worse than none, so it is reported apart).

    python cookbook/bench/llm_json_replies.py
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from reme_service.providers.llm.json_extract import extract_json

ITEM = {"when_to_use": "when booking", "experience": "compare prices first"}
CASES: list[tuple[str, str, Any]] = [
    ("valid, fenced", '```json\n[{"when_to_use": "when booking", "experience": "compare prices first"}]\n```', [ITEM]),
    (
        "valid, in prose",
        'Here you go: {"is_valid": true, "score": 0.9} Hope it helps.',
        {"is_valid": True, "score": 0.9},
    ),
    ("trailing comma", '{"is_valid": true, "score": 0.9,}', {"is_valid": True, "score": 0.9}),
    ("missing comma", '{"when_to_use": "when booking" "experience": "compare prices first"}', ITEM),
    (
        "missing closing bracket",
        '```json\n[{"when_to_use": "when booking", "experience": "compare prices first"}\n```',
        [ITEM],
    ),
    (
        "cut short in an item",
        '[{"when_to_use": "when booking", "experience": "compare prices first"}, {"when_to',
        [ITEM],
    ),
    (
        "cut short after an item",
        '```json\n[{"when_to_use": "when booking", "experience": "compare prices first"},',
        [ITEM],
    ),
    ("single quotes", "{'when_to_use': 'when booking', 'experience': 'compare prices first'}", ITEM),
    (
        "Python literals",
        "{'is_valid': True, 'score': 0.9, 'feedback': None}",
        {"is_valid": True, "score": 0.9, "feedback": None},
    ),
    ("unquoted keys", "{is_valid: true, score: 0.9}", {"is_valid": True, "score": 0.9}),
    ("block comment", '{"is_valid": true, /* sure */ "score": 0.9}', {"is_valid": True, "score": 0.9}),
    ("smart quotes", "{\u201cis_valid\u201d: true, \u201cscore\u201d: 0.9}", {"is_valid": True, "score": 0.9}),
    (
        "unescaped quote in a string",
        '{"feedback": "the "best" one", "score": 1}',
        {"feedback": 'the "best" one', "score": 1},
    ),
    (
        "raw newline in a string",
        '{"feedback": "line one\nline two", "score": 1}',
        {"feedback": "line one\nline two", "score": 1},
    ),
    ("ranking cut short", "[3, 1, 2", [3, 1, 2]),
    (
        "object cut short",
        '{"is_valid": true, "score": 0.9, "feedback": "goo',
        {"is_valid": True, "score": 0.9, "feedback": "goo"},
    ),
    ("no JSON at all", "I think the agent did well.", None),
    ("a word in brackets", "See [note] for details.", None),
]


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    rows = []
    for name, text, expected in CASES:
        strict = extract_json(text, repair=False)
        mended = extract_json(text)
        rows.append((name, strict == expected, mended == expected, mended is not None and mended != expected))
    width = max(len(name) for name, *_ in rows)
    print(f"{'case':<{width}}  strict  with json_repair")
    for name, strict_ok, mended_ok, wrong in rows:
        note = "  (a wrong value)" if wrong else ""
        print(f"{name:<{width}}  {'yes' if strict_ok else 'no ':<6}  {'yes' if mended_ok else 'no'}{note}")
    broken = [r for r, (_, _, expected) in zip(rows, CASES, strict=True) if expected is not None]
    strict_n = sum(r[1] for r in broken)
    mended_n = sum(r[2] for r in broken)
    print(
        f"\nreplies holding JSON: {len(broken)}; read without a second LLM call: strict {strict_n}, "
        f"with json_repair {mended_n} (+{mended_n - strict_n}); wrong values: {sum(r[3] for r in rows)}"
    )
    text = CASES[5][1]
    started = time.perf_counter()
    for _ in range(2000):
        extract_json(text)
    print(f"cost of a mended reply: {(time.perf_counter() - started) / 2000 * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
