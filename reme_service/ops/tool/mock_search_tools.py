"""Three mock search tools with different strengths, for the tool-memory benchmark (`use_mock_search`).

Each tool has, per query complexity (simple, medium, complex), one rate used twice (ReMe §7.5): a call
fails with probability `1 - rate` (output: `FAILURE_TEXT`, `success: false`); a call that did not fail
returns an off-topic result with probability `1 - rate` (content prefixed `LOW_RELEVANCE_PREFIX`), else a
relevant result of the tool's length (short, medium, long).

| tool | simple | medium | complex | result length |
|---|---|---|---|---|
| `search_tool_a` | 0.9 | 0.2 | 0.5 | short |
| `search_tool_b` | 0.3 | 0.9 | 0.5 | medium |
| `search_tool_c` | 0.3 | 0.4 | 0.9 | long |

Randomness is seeded, so a run can be repeated: the draws for a call come from `random.Random` seeded with
the op's seed, the request's seed, the tool name and the query.

Without an LLM, complexity is classified by `classify_heuristic` (word count and clause markers) and the
content comes from templates (`template_content`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Literal

Complexity = Literal["simple", "medium", "complex"]
Length = Literal["short", "medium", "long"]
OutcomeKind = Literal["failure", "irrelevant", "relevant"]

FAILURE_TEXT = "Search backend overloaded: the request could not be served right now. Please try again later."
LOW_RELEVANCE_PREFIX = "[Low Relevance Result] "
LENGTH_WORDS: dict[Length, int] = {"short": 40, "medium": 120, "long": 250}
UNRELATED_TOPICS = (
    "the migration routes of arctic terns",
    "the history of the printing press",
    "how sourdough starters ferment",
    "the rules of competitive curling",
    "the architecture of gothic cathedrals",
    "the life cycle of monarch butterflies",
)
_CLAUSE_MARKERS = re.compile(
    r"\b(and|compare|versus|vs|analy[sz]e|explain why|trade-?offs?|impact|step by step|pros and cons)\b", re.I
)


@dataclass(frozen=True)
class MockSearchTool:
    name: str
    summary: str
    suited_for: str
    rates: dict[Complexity, float]
    length: Length

    @property
    def description(self) -> str:
        return f"{self.summary} Best suited for {self.suited_for}."

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool schema the selecting LLM sees."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string", "description": "what to search for"}},
                    "required": ["query"],
                },
            },
        }


MOCK_SEARCH_TOOLS: tuple[MockSearchTool, ...] = (
    MockSearchTool(
        "search_tool_a",
        "Fast web search returning brief snippets.",
        "simple queries",
        {"simple": 0.9, "medium": 0.2, "complex": 0.5},
        "short",
    ),
    MockSearchTool(
        "search_tool_b",
        "Web search returning summarised articles.",
        "medium complexity queries",
        {"simple": 0.3, "medium": 0.9, "complex": 0.5},
        "medium",
    ),
    MockSearchTool(
        "search_tool_c",
        "In-depth research search returning long reports.",
        "complex queries",
        {"simple": 0.3, "medium": 0.4, "complex": 0.9},
        "long",
    ),
)


def tool_named(name: str) -> MockSearchTool | None:
    return next((tool for tool in MOCK_SEARCH_TOOLS if tool.name == name), None)


def classify_heuristic(query: str) -> Complexity:
    """No-LLM complexity: up to 8 words and no clause marker → simple; over 20 words or 2+ markers → complex."""
    words = len(query.split())
    markers = len(_CLAUSE_MARKERS.findall(query))
    if words > 20 or markers >= 2:
        return "complex"
    if words <= 8 and markers == 0:
        return "simple"
    return "medium"


def parse_complexity(reply: str) -> Complexity:
    """The LLM's one-word classification: contains "simple" → simple, "complex" → complex, else medium."""
    text = reply.lower()
    if "simple" in text:
        return "simple"
    if "complex" in text:
        return "complex"
    return "medium"


def call_rng(op_seed: int, request_seed: int, tool: MockSearchTool, query: str) -> random.Random:
    return random.Random(f"{op_seed}:{request_seed}:{tool.name}:{query}")  # noqa: S311 - a simulation, not security


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    topic: str = ""


def draw_outcome(tool: MockSearchTool, complexity: Complexity, rng: random.Random) -> Outcome:
    rate = tool.rates[complexity]
    if rng.random() >= rate:
        return Outcome("failure")
    if rng.random() >= rate:
        return Outcome("irrelevant", rng.choice(UNRELATED_TOPICS))
    return Outcome("relevant")


def template_content(tool: MockSearchTool, query: str, outcome: Outcome) -> str:
    """The no-LLM result text for an outcome (the failure text for failures)."""
    if outcome.kind == "failure":
        return FAILURE_TEXT
    words = LENGTH_WORDS[tool.length]
    if outcome.kind == "irrelevant":
        sentence = f"Here is some general background on {outcome.topic}, which is a popular subject. "
        return LOW_RELEVANCE_PREFIX + _repeat(sentence, words)
    sentence = f"Result for '{query}': a source addressing this question directly, with the key facts. "
    return _repeat(sentence, words)


def _repeat(sentence: str, words: int) -> str:
    per = max(1, len(sentence.split()))
    return (sentence * max(1, round(words / per))).strip()
