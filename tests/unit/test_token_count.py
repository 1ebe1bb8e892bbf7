"""Token counting: what the heuristic counts (tool calls included), the tokenizer-backed counters, the factory,
and the heuristic's measured error against the offline MiniLM WordPiece tokenizer (the figures documented in
`reme_service/ops/working/token_count.py`)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from reme_service.errors import ConfigError
from reme_service.ops.working.token_count import (
    HeuristicTokenCounter,
    TokenizerTokenCounter,
    make_token_counter,
    minilm_tokenizer_file,
)
from reme_service.schema.messages import Message, Role, ToolCall

PROSE = (
    "Hi, I am planning a trip to Lisbon next month with my partner. We would like a quiet hotel close to the "
    "old town, and we prefer places where we can walk to restaurants in the evening. Could you suggest a few "
    "options and tell me which days are best for the museums?"
)
PYTHON = '''def load_config(path: str) -> dict[str, Any]:
    """Read the YAML file and merge the defaults."""
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
    for key, value in DEFAULTS.items():
        data.setdefault(key, value)
    return data
'''
JSON_OUTPUT = (
    '{"results": [{"id": 4821, "name": "Hotel Alfama Patio", "rating": 4.6, "price_eur": 132, '
    '"distance_km": 0.4, "tags": ["quiet", "terrace"]}, {"id": 5310, "name": "Casa do Castelo", '
    '"rating": 4.8, "price_eur": 168, "distance_km": 0.7, "tags": ["breakfast", "view"]}], "total": 2, "page": 1}'
)
SHELL_LOG = (
    "2024-05-14 09:12:03,771 INFO  [worker-3] GET /api/v2/orders?page=2&size=50 200 18ms\n"
    "2024-05-14 09:12:04,102 WARN  [worker-1] retrying POST /api/v2/payments (attempt 2/5): ConnectionResetError\n"
    "2024-05-14 09:12:05,990 ERROR [worker-1] /srv/app/payments/client.py:143 timeout after 30.0s\n"
)
CHINESE = "我下个月想和家人去杭州旅行，希望住在西湖附近安静一点的酒店，晚上可以步行去餐厅。请推荐几个选择。"

SAMPLES = {"prose": PROSE, "python": PYTHON, "json": JSON_OUTPUT, "log": SHELL_LOG, "chinese": CHINESE}

CONVERSATION = [
    Message(role=Role.SYSTEM, content="You are a travel assistant with a hotel search tool."),
    Message(role=Role.USER, content=PROSE),
    Message(
        role=Role.ASSISTANT,
        content="Let me search for hotels near the old town.",
        tool_calls=[ToolCall(id="call_1", name="search_hotels", arguments='{"city": "Lisbon", "area": "Alfama"}')],
    ),
    Message(role=Role.TOOL, content=JSON_OUTPUT, tool_call_id="call_1"),
    Message(role=Role.ASSISTANT, content="Casa do Castelo has the best rating; Hotel Alfama Patio is cheaper."),
    Message(role=Role.USER, content="Our booking script fails, here is the log:\n" + SHELL_LOG),
    Message(role=Role.ASSISTANT, content="The payment client times out. Here is the loader it uses:\n" + PYTHON),
    Message(role=Role.USER, content=CHINESE),
]


@pytest.fixture(scope="module")
def minilm() -> TokenizerTokenCounter:
    return TokenizerTokenCounter.minilm()


def test_heuristic_is_ceil_of_total_characters_over_four() -> None:
    counter = HeuristicTokenCounter()
    assert counter.count_text("") == 0
    assert counter.count_text("abcd") == 1
    assert counter.count_text("abcde") == 2
    # characters are summed over the messages first, then rounded up: 5 + 5 chars -> 3 tokens (not 2 + 2)
    five = [Message(role=Role.USER, content="abcde"), Message(role=Role.USER, content="abcde")]
    assert counter.count_messages(five) == 3


def test_heuristic_counts_reasoning_and_tool_calls() -> None:
    counter = HeuristicTokenCounter()
    call = ToolCall(id="call_x", name="grep", arguments='{"pattern": "error", "file_path": "a.txt"}')
    message = Message(role=Role.ASSISTANT, content="", reasoning_content="think", tool_calls=[call])
    chars = len("think") + len("grep") + len(call.arguments)
    assert counter.count_message(message) == math.ceil(chars / 4)
    assert counter.count_message(Message(role=Role.ASSISTANT, content="", tool_calls=[call])) > 0


def test_content_blocks_are_counted_as_their_text() -> None:
    counter = HeuristicTokenCounter()
    blocks = Message(role=Role.USER, content=[{"type": "text", "text": "abcdefgh"}, {"type": "image_url"}])
    assert counter.count_message(blocks) == 2


def test_minilm_is_found_offline_and_counts_wordpieces(minilm: TokenizerTokenCounter) -> None:
    assert minilm_tokenizer_file().name == "tokenizer.json"
    assert minilm.count_text("") == 0
    assert minilm.count_text("hello world") == 2
    # no truncation at the model's 128/512-token limit
    assert minilm.count_text("word " * 2000) == 2000
    call = ToolCall(id="c", name="search", arguments='{"q": "x"}')
    message = Message(role=Role.ASSISTANT, content="hello world", tool_calls=[call])
    assert minilm.count_message(message) == 2 + minilm.count_text("search") + minilm.count_text('{"q": "x"}')


def test_factory_names_and_errors(tmp_path: Path) -> None:
    assert make_token_counter("heuristic").name == "heuristic"
    assert make_token_counter("minilm").name == "minilm"
    by_path = make_token_counter(f"tokenizer:{minilm_tokenizer_file()}")
    assert by_path.count_text("hello world") == 2
    with pytest.raises(ConfigError, match="valid: heuristic, minilm"):
        make_token_counter("tiktoken")
    with pytest.raises(ConfigError, match="does not exist"):
        make_token_counter(f"tokenizer:{tmp_path / 'none.json'}")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match="not a tokenizer.json"):
        make_token_counter(f"tokenizer:{bad}")


def _error(heuristic: int, real: int) -> float:
    return heuristic / real - 1


def test_measured_error_against_minilm(minilm: TokenizerTokenCounter) -> None:
    """The figures in token_count.py's docstring, with bounds a little wider than the measured values."""
    heuristic = HeuristicTokenCounter()
    real = {name: minilm.count_text(text) for name, text in SAMPLES.items()}
    assert real == {"prose": 58, "python": 96, "json": 141, "log": 121, "chinese": 48}
    errors = {name: _error(heuristic.count_text(text), real[name]) for name, text in SAMPLES.items()}
    bounds = {
        "prose": (0.05, 0.25),  # measured +14 %
        "python": (-0.35, -0.15),  # -26 %
        "json": (-0.6, -0.4),  # -49 %
        "log": (-0.5, -0.3),  # -41 %
        "chinese": (-0.8, -0.7),  # -75 %
    }
    for name, (low, high) in bounds.items():
        assert low <= errors[name] <= high, (name, errors[name])
    assert minilm.count_messages(CONVERSATION) == 546
    assert heuristic.count_messages(CONVERSATION) == 371
    assert -0.4 <= _error(371, 546) <= -0.25  # -32 % over the whole conversation
